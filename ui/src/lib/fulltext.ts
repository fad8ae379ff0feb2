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

/** Svelte action for a `<select>`: its `title` is the chosen option's text while that text is
 *  wider than the box shows (measured in the select's font, less room for the arrow).
 *  `chosen` is the selected value, so the title follows a new choice. */
export function chosenTextOnHover(select: HTMLSelectElement, chosen: string) {
  const context = document.createElement('canvas').getContext('2d');
  const check = () => {
    const text = select.selectedOptions[0]?.textContent?.trim() ?? '';
    const css = getComputedStyle(select);
    if (context) context.font = `${css.fontWeight} ${css.fontSize} ${css.fontFamily}`;
    const room = select.clientWidth - parseFloat(css.paddingLeft) - parseFloat(css.paddingRight) - parseFloat(css.fontSize) * 1.5;
    if (text && context && context.measureText(text).width > room) select.title = text;
    else select.removeAttribute('title');
  };
  const observer = new ResizeObserver(check);
  observer.observe(select);
  check();
  return {
    update(_chosen: string) {
      // After Svelte has set the new value.
      queueMicrotask(check);
    },
    destroy() {
      observer.disconnect();
    },
  };
}
