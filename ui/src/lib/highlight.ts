// Syntax colours for code blocks in answers: highlight.js's core with the languages people ask
// about most, bundled (nothing is fetched). Its output is text in <span class="hljs-…">, escaped
// by highlight.js itself; markdown.ts still passes it through the sanitizer.
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import go from 'highlight.js/lib/languages/go';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import markdown from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import shell from 'highlight.js/lib/languages/shell';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

const LANGUAGES = { bash, c, cpp, css, diff, go, java, javascript, json, markdown, python, rust, shell, sql, typescript, xml, yaml };
for (const [name, language] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, language);

/** The language a fence names, as highlight.js knows it ("py" -> "python"), or null. */
export function knownLanguage(fence: string | undefined): string | null {
  const name = (fence ?? '').trim().split(/\s+/)[0].toLowerCase();
  if (!name) return null;
  const language = hljs.getLanguage(name);
  if (!language) return null;
  // Report the registered name, not the alias.
  return Object.keys(LANGUAGES).find((key) => hljs.getLanguage(key) === language) ?? name;
}

/** `code` as highlighted HTML in `language` (a name knownLanguage returned). */
export function highlightCode(code: string, language: string): string {
  return hljs.highlight(code, { language, ignoreIllegals: true }).value;
}
