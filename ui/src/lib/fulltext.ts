// A label cut short with an ellipsis (a narrow window, large text) keeps its whole text within
// reach: while it is cut, a pointer resting on it shows the whole text as its tooltip.

/** Svelte action: `use:fullTextOnHover={text}` on an element whose text may be cut. Its `title`
 *  is `text` while the text does not fit, and absent otherwise, or when `text` is null (e.g.
 *  while the page the label opens is shown, where a tooltip would cover that page's ✕). */
export function fullTextOnHover(el: HTMLElement, text: string | null) {
  let current = text;
  const check = () => {
    if (current !== null && el.scrollWidth > el.clientWidth + 1) el.title = current;
    else el.removeAttribute('title');
  };
  const observer = new ResizeObserver(check);
  observer.observe(el);
  check();
  return {
    update(text: string | null) {
      current = text;
      check();
    },
    destroy() {
      observer.disconnect();
    },
  };
}
