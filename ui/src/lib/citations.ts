// The [n] markers of an answer that cites the user's files, turned into buttons that open source n,
// and how the sources under an answer are grouped. Which markers count is the backend's rule
// (crates/app/src/citations.rs): `[1]`, `[1][2]`, `[1, 2]`, `[1-3]`, `【1】` (full-width digits too),
// not in code or links, not numbers no source has. Here they are found on the sanitized, rendered
// answer: code and links are elements there (skipped), so only the text between them is read.
// Built with DOM calls (never from model text).
import type { Source, SourceUse } from './bindings';
import { sourceLabel } from './documents';
import { t } from './i18n/index.svelte';

export interface CitationOptions {
  /** The source numbers the answer has. */
  numbers: number[];
  onCite: (n: number) => void;
}

/** A bracket group of numbers: separators , ; ，、； and ranges with - – —. */
const MARKER = /([[【])[ ]*([0-9０-９]{1,4}(?:[ ]*(?:[,;，、；]|[-–—])[ ]*[0-9０-９]{1,4})*)[ ]*([\]】])/g;
/** The widest range read in a marker, as the backend reads it. */
const MAX_RANGE = 20;

/** The numbers a marker's inside stands for (`1, 2`, `1-3`, `１，２`), or null when it is none. */
export function markerNumbers(inside: string): number[] | null {
  const ascii = inside.replace(/[０-９]/g, (d) => String(d.charCodeAt(0) - 0xff10));
  const numbers: number[] = [];
  const parts = ascii.split(/([,;，、；]|[-–—])/).map((p) => p.trim());
  for (let i = 0; i < parts.length; i += 2) {
    const n = Number(parts[i]);
    if (parts[i] === '' || !Number.isInteger(n)) return null;
    if (i > 0 && /[-–—]/.test(parts[i - 1])) {
      const from = numbers[numbers.length - 1];
      if (n < from || n - from > MAX_RANGE) return null;
      for (let k = from + 1; k <= n; k++) numbers.push(k);
    } else {
      numbers.push(n);
    }
  }
  return numbers;
}

/** Replace each marker under `root` that names a known source with buttons; returns how many
 *  buttons were made. */
export function linkCitations(root: HTMLElement, options: CitationOptions): number {
  const known = new Set(options.numbers);
  if (known.size === 0) return 0;
  const walker = root.ownerDocument.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const texts: Text[] = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = (node as Text).parentElement;
    if (parent?.closest('pre, code, a, button.cite')) continue;
    if (MARKER.test((node as Text).data)) texts.push(node as Text);
    MARKER.lastIndex = 0;
  }
  let linked = 0;
  const doc = root.ownerDocument;
  for (const text of texts) {
    const data = text.data;
    const pieces = doc.createDocumentFragment();
    let at = 0;
    let changed = false;
    // Where the last marker ended: `[1][2]` is two markers, `[text][1]` a reference link.
    let lastMarkerEnd = -1;
    for (const match of data.matchAll(MARKER)) {
      const start = match.index ?? 0;
      const end = start + match[0].length;
      const pair = (match[1] === '[' && match[3] === ']') || (match[1] === '【' && match[3] === '】');
      const numbers = pair ? markerNumbers(match[2]) : null;
      const reference = match[1] === '[' && data[start - 1] === ']' && lastMarkerEnd !== start;
      // A link's text is an element; `[1](` left as text is a link the renderer refused.
      if (!numbers || reference || data[end] === '(') continue;
      lastMarkerEnd = end;
      if (!numbers.some((n) => known.has(n))) continue;
      pieces.append(doc.createTextNode(data.slice(at, start)));
      for (const n of numbers) {
        if (!known.has(n)) {
          pieces.append(doc.createTextNode(`[${n}]`));
          continue;
        }
        const button = doc.createElement('button');
        button.type = 'button';
        button.className = 'cite';
        button.textContent = `[${n}]`;
        button.dataset.cite = String(n);
        button.setAttribute('aria-label', t('sources.openN', { n }));
        button.addEventListener('click', () => options.onCite(n));
        pieces.append(button);
        linked++;
      }
      at = end;
      changed = true;
    }
    if (!changed) continue;
    pieces.append(doc.createTextNode(data.slice(at)));
    text.replaceWith(pieces);
  }
  return linked;
}

/** Every [n] an entry under an answer stands for (one page given in two passages is one entry). */
export function entryNumbers(source: Source): number[] {
  return source.numbers && source.numbers.length > 0 ? source.numbers : [source.number];
}

/** The entry whose numbers hold `n`. */
export function entryFor(sources: Source[], n: number): Source | undefined {
  return sources.find((s) => entryNumbers(s).includes(n));
}

/** How an entry was used; sources saved before Hearth told it apart are `given`. */
export function usedOf(source: Source): SourceUse {
  return source.used ?? 'given';
}

/** The sources under an answer in their groups: what it cites (or, without markers, what it
 *  probably used), and what the model also read. A greeting has none of the first two. While the
 *  answer is written the sources are only `given`, and no group shows yet. */
export interface SourceGroups {
  cited: Source[];
  probable: Source[];
  alsoRead: Source[];
}

export function groupSources(sources: Source[]): SourceGroups {
  const of = (use: SourceUse) => sources.filter((s) => usedOf(s) === use);
  return { cited: of('cited'), probable: of('probably_used'), alsoRead: of('also_read') };
}

/** An entry as listed: "contract.pdf, page 3", or "Read whole: notes.md" for a short file given whole. */
export function entryLabel(source: Source): string {
  if (source.read_whole && !source.place && usedOf(source) === 'also_read') return t('sources.readWhole', { name: source.name });
  return sourceLabel(source);
}
