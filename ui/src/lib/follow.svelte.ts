// Whether the conversation follows its newest line ("stuck to the bottom"), decided by what the
// user does, not by how far the view is from the bottom. Any move up that the user made (a wheel
// notch or touchpad swipe upwards, Page Up, ↑, Home, or a scroll event that went up) stops
// following at once; following resumes only when the user moves down to the very bottom, or
// asks for it (Jump to the latest, sending, another conversation).
//
// Why not a distance: WebKitGTK animates a wheel notch, and its first scroll event moves 1 px.
// A rule "within 4 px of the bottom means following" read that first step as "still at the
// bottom", and the view snapped back down, so the wheel could never scroll up (review #1).
//
// The app only ever scrolls down (to the bottom), so a scroll event whose position went up is
// the user's, except when the content got shorter and the browser clamped the position: then
// the view sits exactly at the bottom, which this tells apart.

/** A scrolled box's numbers, as in the DOM (`scrollTop`, `scrollHeight`, `clientHeight`). */
export interface ScrollBox {
  scrollTop: number;
  scrollHeight: number;
  clientHeight: number;
}

/** How close to the bottom (CSS px) a move down must come to follow again. */
const BOTTOM = 2;

/** Keys that move a scrolled box up. */
const UP_KEYS = new Set(['PageUp', 'ArrowUp', 'Home']);

export class BottomFollow {
  /** Following the newest line. */
  following = $state(true);
  /** `scrollTop` when last seen, to tell the direction of the next scroll event. */
  #lastTop: number | null = null;

  /** A scroll event of the box. */
  scrolled(box: ScrollBox): void {
    const last = this.#lastTop;
    this.#lastTop = box.scrollTop;
    if (last === null) return;
    const toBottom = box.scrollHeight - box.scrollTop - box.clientHeight;
    if (box.scrollTop < last && toBottom > 0.5) {
      // Up, and not a clamp to the bottom: the user reads back. A 1 px step counts.
      this.following = false;
    } else if (box.scrollTop > last && toBottom <= BOTTOM) {
      // Down to the bottom: the user is back.
      this.following = true;
    }
  }

  /** A wheel or touchpad event: upwards stops following before the view has moved. */
  wheel(deltaY: number): void {
    if (deltaY < 0) this.following = false;
  }

  /** A key pressed in the box: one that scrolls up stops following. */
  key(key: string): void {
    if (UP_KEYS.has(key)) this.following = false;
  }

  /** The user asked for the newest line (Jump to the latest, sent, regenerated, switched). */
  follow(): void {
    this.following = true;
  }

  /** The app moved the box itself (to the bottom): where it is now, so the next event's
   * direction is measured from here. */
  placed(box: ScrollBox): void {
    this.#lastTop = box.scrollTop;
  }
}
