// The [n] markers of an answer that cites the user's files, turned into buttons that open source n.
// Built with DOM calls on the sanitized answer (never from model text); markers inside code, and
// numbers no source has, stay plain text.
import { t } from './i18n/index.svelte';

export interface CitationOptions {
  /** The source numbers the answer has. */
  numbers: number[];
  onCite: (n: number) => void;
}

const MARKER = /\[(\d{1,3})\]/g;

/** Replace each known [n] under `root` with a button; returns how many were linked. */
export function linkCitations(root: HTMLElement, options: CitationOptions): number {
  const known = new Set(options.numbers);
  if (known.size === 0) return 0;
  const walker = root.ownerDocument.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const texts: Text[] = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = (node as Text).parentElement;
    if (parent?.closest('pre, code, button.cite')) continue;
    if (MARKER.test((node as Text).data)) texts.push(node as Text);
    MARKER.lastIndex = 0;
  }
  let linked = 0;
  for (const text of texts) {
    const doc = root.ownerDocument;
    const pieces = doc.createDocumentFragment();
    let at = 0;
    for (const match of text.data.matchAll(MARKER)) {
      const n = Number(match[1]);
      if (!known.has(n)) continue;
      pieces.append(doc.createTextNode(text.data.slice(at, match.index)));
      const button = doc.createElement('button');
      button.type = 'button';
      button.className = 'cite';
      button.textContent = `[${n}]`;
      button.dataset.cite = String(n);
      button.setAttribute('aria-label', t('sources.openN', { n }));
      button.addEventListener('click', () => options.onCite(n));
      pieces.append(button);
      at = (match.index ?? 0) + match[0].length;
      linked++;
    }
    if (at === 0) continue;
    pieces.append(doc.createTextNode(text.data.slice(at)));
    text.replaceWith(pieces);
  }
  return linked;
}
