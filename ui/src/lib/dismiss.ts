// A Svelte action for popups (menus): a pointer press outside the element, or Escape, closes it.

export function dismissable(node: HTMLElement, onDismiss: () => void) {
  let close = onDismiss;
  const down = (event: PointerEvent) => {
    if (!node.contains(event.target as Node)) close();
  };
  const key = (event: KeyboardEvent) => {
    if (event.key === 'Escape') close();
  };
  document.addEventListener('pointerdown', down, true);
  document.addEventListener('keydown', key);
  return {
    update(next: () => void) {
      close = next;
    },
    destroy() {
      document.removeEventListener('pointerdown', down, true);
      document.removeEventListener('keydown', key);
    },
  };
}
