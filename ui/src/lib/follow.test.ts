import { describe, expect, it } from 'vitest';
import { BottomFollow, type ScrollBox } from './follow.svelte';

// The conversation measured in the real app (WebKitGTK, 1366x768): 1600 px of content in a
// 567 px box, so the bottom is at scrollTop 1033.
const HEIGHT = 1600;
const CLIENT = 567;
const BOTTOM = HEIGHT - CLIENT;
const at = (scrollTop: number, scrollHeight = HEIGHT): ScrollBox => ({ scrollTop, scrollHeight, clientHeight: CLIENT });

/** A follower that has seen the view at the bottom, as after an answer. */
function atBottom(): BottomFollow {
  const follow = new BottomFollow();
  follow.placed(at(BOTTOM));
  follow.scrolled(at(BOTTOM));
  return follow;
}

describe('following the newest line', () => {
  it('review #1 (S1): a wheel notch up in WebKitGTK, whose smooth scroll first moves 1 px, stops following and stays stopped', () => {
    const follow = atBottom();
    // The sequence measured in the page: the wheel event (deltaY -83), then the animation's
    // scroll events, the first one 1 px up.
    follow.wheel(-83);
    expect(follow.following).toBe(false);
    for (const top of [1032, 1027, 1016, 998, 979, 963, 954, 950]) {
      follow.scrolled(at(top));
      expect(follow.following, `at ${top}`).toBe(false);
    }
  });

  it('review #1 (S1): a touchpad swipe up (small deltas, the first scroll event 1 px) stops following, also without a wheel event first', () => {
    const follow = atBottom();
    // A touchpad sends many small wheel deltas; the first scroll event is 1 px.
    const steps: [number, number][] = [[-1, 1032], [-2, 1030], [-3, 1027], [-5, 1022], [-4, 1018]];
    for (const [delta, top] of steps) {
      follow.wheel(delta);
      follow.scrolled(at(top));
      expect(follow.following, `at ${top}`).toBe(false);
    }
    // A 1 px move up with no wheel event (the scrollbar's arrow, a kinetic scroll, touch).
    const bare = atBottom();
    bare.scrolled(at(BOTTOM - 1));
    expect(bare.following).toBe(false);
  });

  it('review #1 (S1): Page Up, ↑ and Home stop following before the view moves', () => {
    for (const key of ['PageUp', 'ArrowUp', 'Home']) {
      const follow = atBottom();
      follow.key(key);
      expect(follow.following, key).toBe(false);
    }
    const follow = atBottom();
    follow.key('a');
    follow.key('PageDown');
    expect(follow.following).toBe(true);
  });

  it('review #1 (S1): scrolling back down to the bottom follows again; stopping short of it does not', () => {
    const follow = atBottom();
    follow.wheel(-83);
    follow.scrolled(at(950));
    follow.wheel(83);
    follow.scrolled(at(1000));
    expect(follow.following, '33 px short of the bottom').toBe(false);
    follow.scrolled(at(1028));
    expect(follow.following, '5 px short of the bottom').toBe(false);
    follow.scrolled(at(BOTTOM));
    expect(follow.following).toBe(true);
  });

  it('an answer growing while the user reads back does not pull the view down', () => {
    const follow = atBottom();
    follow.wheel(-83);
    follow.scrolled(at(900));
    // The answer grows: no scroll event, the position stays; then the user reads on upwards.
    follow.scrolled(at(880, 2400));
    expect(follow.following).toBe(false);
  });

  it('the content getting shorter clamps the view to the bottom: still following', () => {
    const follow = atBottom();
    // Regenerate empties the last answer: the browser clamps scrollTop to the new bottom.
    follow.scrolled(at(700, 700 + CLIENT));
    expect(follow.following).toBe(true);
  });

  it('the app placing the view at the bottom is not a move of the user', () => {
    const follow = atBottom();
    follow.placed(at(1500, 1500 + CLIENT));
    follow.scrolled(at(1500, 1500 + CLIENT));
    expect(follow.following).toBe(true);
    follow.follow();
    expect(follow.following).toBe(true);
  });
});
