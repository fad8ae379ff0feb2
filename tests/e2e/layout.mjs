// What only the real web view (WebKitGTK) shows, for the end-to-end run: the layout measured in
// the app's own DOM, and the window sized and photographed through the X server.
//
// LAYOUT_PROBLEMS is the body of a WebDriver script (execute/sync): it returns what is wrong with
// the page now, as sentences, or an empty list. It checks the page never scrolls; the shell's
// regions stay inside the window and off each other; nothing visible pokes out of the window's
// right edge (horizontal overflow) unless a code block inside the window scrolls it sideways, or
// out of the bottom unless a scrolled box holds it; no text
// is cut off silently (a box that hides overflow with no ellipsis); and the conversation keeps
// at least `minConversation` px of height (arguments[0]).
import { execFileSync } from 'node:child_process';

export const LAYOUT_PROBLEMS = `
const minConversation = arguments[0];
const bad = [];
const W = window.innerWidth;
const H = window.innerHeight;
const doc = document.scrollingElement;
if (doc.scrollHeight > H + 1 || doc.scrollWidth > W + 1) bad.push('the page is ' + doc.scrollWidth + 'x' + doc.scrollHeight + ' in a ' + W + 'x' + H + ' window');
if (window.scrollX !== 0 || window.scrollY !== 0) bad.push('the page is scrolled to ' + window.scrollX + ',' + window.scrollY);
const visible = (el) => { const r = el.getBoundingClientRect(); const s = getComputedStyle(el); return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.opacity !== '0'; };
const name = (el) => el.dataset.testid || (typeof el.className === 'string' && el.className.split(' ')[0]) || el.tagName.toLowerCase();
const where = (r) => Math.round(r.left) + ',' + Math.round(r.top) + ' to ' + Math.round(r.right) + ',' + Math.round(r.bottom);
const overlap = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
const regions = ['[data-testid="sidebar"]', '[data-testid="header"]', '[data-testid="message-list"]', '.composer-wrap', '.page-head', '.page-body']
  .flatMap((s) => [...document.querySelectorAll(s)]).filter(visible);
for (const el of regions) {
  const r = el.getBoundingClientRect();
  if (r.left < -1 || r.top < -1 || r.right > W + 1 || r.bottom > H + 1) bad.push(name(el) + ' leaves the window: ' + where(r));
}
for (let i = 0; i < regions.length; i++) for (let j = i + 1; j < regions.length; j++) {
  if (overlap(regions[i].getBoundingClientRect(), regions[j].getBoundingClientRect())) bad.push(name(regions[i]) + ' overlaps ' + name(regions[j]));
}
// A box that scrolls or clips its content (the conversation, a page's body, a list).
const clipper = (el) => { for (let p = el.parentElement; p; p = p.parentElement) { const s = getComputedStyle(p); if (/(auto|scroll|hidden|clip)/.test(s.overflowY)) return p; } return null; };
// A code block scrolls sideways (review #29): what it holds beyond its edge is hidden by it,
// not out of the window, as long as the block itself is inside the window.
const sideScroller = (el) => { const pre = el.parentElement?.closest('pre'); return !!pre && /(auto|scroll)/.test(getComputedStyle(pre).overflowX) && pre.getBoundingClientRect().right <= W + 1; };
let reported = 0;
for (const el of document.querySelectorAll('body *')) {
  if (reported >= 12 || !visible(el)) continue;
  const r = el.getBoundingClientRect();
  const s = getComputedStyle(el);
  if (s.position === 'fixed' && el.closest('[role="dialog"], [role="menu"], [role="tooltip"]')) continue;
  if (r.right > W + 1 && r.left < W && !sideScroller(el)) { bad.push(name(el) + ' pokes out of the window on the right: ' + where(r)); reported++; continue; }
  const box = clipper(el);
  if (r.bottom > H + 1 && r.top < H && !box) { bad.push(name(el) + ' is cut off at the bottom: ' + where(r)); reported++; continue; }
  // Text cut off with no ellipsis: a box that hides what overflows it sideways.
  const hides = /(hidden|clip)/.test(s.overflowX) && !/(auto|scroll)/.test(s.overflowY);
  if (hides && s.textOverflow !== 'ellipsis' && el.scrollWidth > el.clientWidth + 2 && el.textContent.trim()) {
    bad.push(name(el) + ' cuts its text off: ' + el.scrollWidth + ' px in ' + el.clientWidth + ' px'); reported++;
  }
}
const list = document.querySelector('[data-testid="message-list"]');
if (list && visible(list) && list.getBoundingClientRect().height < minConversation) bad.push('the conversation is only ' + Math.round(list.getBoundingClientRect().height) + ' px high (at least ' + minConversation + ')');
return bad;`;

/** The app's window on the X server (its title is "Hearth"). */
export function appWindow() {
  const ids = execFileSync('xdotool', ['search', '--sync', '--onlyvisible', '--name', '^Hearth$'], { timeout: 30_000 }).toString().trim().split('\n');
  return ids[ids.length - 1];
}

/** Sizes the app's window and puts it at 0,0 (no window manager: the X server does it; the
 *  caller waits for the page to see the new size). */
export function sizeWindow(id, width, height) {
  execFileSync('xdotool', ['windowmove', id, '0', '0']);
  execFileSync('xdotool', ['windowsize', id, String(width), String(height)]);
}

/** Saves a picture of the app's window. */
export function photograph(id, path) {
  execFileSync('import', ['-window', id, path]);
}
