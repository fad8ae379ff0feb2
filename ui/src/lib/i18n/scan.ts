// Finds the words a component shows that do not come from the catalog: text between tags and the
// title, aria-label, placeholder and alt attributes written as literals, and quoted sentences inside
// the markup's expressions (`{busy ? 'Saving…' : 'Save'}`). Expressions are removed before the
// text is read, so `{t('…')}` counts as translated.

/** Text that needs no translation: symbols, units, numbers, names. */
export const ALLOWED_LITERALS = new Set(['‹', '›', '✕', '×', '…', '—', '·', '%', '/', 'W', 'J', 'Wh', 'ms', 's', '[', ']', '(', ')', ':', '+', '−', '-', '↑', '↓', '▾', '▸', '⌘', 'Ctrl', 'Ctrl+N', 'Ctrl+,', 'Ctrl+/', 'Hearth', 'NPU', 'SmolLM2-135M']);

/** Split markup into its text outside `{…}` expressions (balanced) and the expressions' text. */
function splitExpressions(markup: string): { outside: string; inside: string } {
  let outside = '';
  let inside = '';
  let depth = 0;
  for (const ch of markup) {
    if (ch === '{') depth++;
    else if (ch === '}' && depth > 0) {
      depth--;
      if (depth === 0) inside += '\n';
    } else if (depth === 0) outside += ch;
    else inside += ch;
  }
  return { outside, inside };
}

/** Quoted strings in expressions that read as words for people: a capitalised word, or several
 *  words (keys like 'common.send', class names and test ids are neither). */
function sentences(expressions: string): string[] {
  const quoted = [...expressions.matchAll(/'([^'\n]*)'|"([^"\n]*)"/g)].map((m) => m[1] ?? m[2]);
  return quoted.filter((s) => /^\p{Lu}\p{Ll}+(?:[\s,.…!?]|$)/u.test(s) || /\p{L}{2,}\s+\p{L}{2,}/u.test(s));
}

/** Strings a component compares with but never shows: key names, the backend's stop reasons. */
export const NOT_SHOWN = new Set(['Enter', 'Escape', 'Home', 'End', 'Tab', 'length limit', 'context full']);

/** The code of a component's scripts, comments removed. */
function scripts(source: string): string {
  return [...source.matchAll(/<script[^>]*>([\s\S]*?)<\/script>/g)]
    .map((m) => m[1].replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1'))
    .join('\n');
}

/** The user-visible literals of one component's source. */
export function untranslated(source: string): string[] {
  const { outside: markup, inside } = splitExpressions(
    source
      .replace(/<script[\s\S]*?<\/script>/g, '')
      .replace(/<style[\s\S]*?<\/style>/g, '')
      .replace(/<!--[\s\S]*?-->/g, ''),
  );
  const found: string[] = [];
  for (const m of markup.matchAll(/\b(?:title|aria-label|placeholder|alt)="([^"]*)"/g)) found.push(m[1].trim());
  const text = markup.replace(/<[^>]*>/g, '\n');
  for (const line of text.split('\n')) found.push(line.trim());
  found.push(...sentences(inside), ...sentences(scripts(source)));
  return found.filter((s) => s !== '' && /\p{L}/u.test(s) && !ALLOWED_LITERALS.has(s) && !NOT_SHOWN.has(s) && !/^https?:\/\//.test(s));
}
