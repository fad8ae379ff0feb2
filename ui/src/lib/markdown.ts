// Model output -> safe HTML. Model text is untrusted: it must never run script, load remote
// content (images, styles, frames) or navigate the app window. marked renders, DOMPurify cleans,
// and the hooks below turn images into their alt text and links into inert text with a title.
import { Marked } from 'marked';
import DOMPurify from 'dompurify';
import { highlightCode, knownLanguage } from './highlight';

function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

// Raw HTML in model output is shown as text, and images as their description: the sanitizer
// below is the second line of defence, not the first.
const marked = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    html(token) {
      return escapeHtml(token.text);
    },
    code(token) {
      // A known language gets colours and its name on the block; anything else stays plain.
      const language = knownLanguage(token.lang);
      const body = language ? highlightCode(token.text, language) : escapeHtml(token.text);
      const cls = language ? ` class="hljs language-${language}"` : '';
      return `<pre><code${cls}>${body}</code></pre>\n`;
    },
    image(token) {
      const alt = token.text ?? '';
      return `<span class="md-image-blocked">${escapeHtml(alt ? `[image: ${alt}]` : '[image]')}</span>`;
    },
  },
});

const FORBID_TAGS = [
  'style', 'link', 'meta', 'base', 'iframe', 'frame', 'object', 'embed', 'form', 'input',
  'button', 'textarea', 'select', 'option', 'svg', 'math', 'video', 'audio', 'source',
  'picture', 'track', 'canvas', 'template', 'dialog',
];
const FORBID_ATTR = ['style', 'srcset', 'background', 'poster', 'formaction', 'action', 'ping', 'id', 'name'];

let hooksInstalled = false;

function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  DOMPurify.addHook('uponSanitizeElement', (node, data) => {
    if (data.tagName !== 'img' || !(node instanceof Element)) return;
    // No image is ever loaded from model output: show its description instead.
    const alt = node.getAttribute('alt') ?? '';
    const placeholder = node.ownerDocument.createElement('span');
    placeholder.className = 'md-image-blocked';
    placeholder.textContent = alt ? `[image: ${alt}]` : '[image]';
    node.replaceWith(placeholder);
  });
  DOMPurify.addHook('afterSanitizeAttributes', (node) => {
    if (node.tagName === 'A') {
      // Links would navigate the app window away: keep the text, show the target on hover.
      const href = node.getAttribute('href');
      node.removeAttribute('href');
      node.removeAttribute('target');
      if (href) node.setAttribute('title', href);
      node.setAttribute('class', 'md-link');
    }
  });
}

/** Render markdown from the model to sanitized HTML. */
export function renderMarkdown(text: string): string {
  installHooks();
  const html = marked.parse(text) as string;
  return DOMPurify.sanitize(html, {
    FORBID_TAGS,
    FORBID_ATTR,
    ALLOW_DATA_ATTR: false,
    ALLOW_UNKNOWN_PROTOCOLS: false,
  });
}

/** An answer split into its (folded) thinking and the visible answer. */
export interface ThinkingSplit {
  /** The thinking sections in order, trimmed (none: no thinking). A closed empty one is left
   * out; the last, while still open, is kept even when empty so far. */
  thinking: string[];
  /** True while the model is still inside its (last) thinking section. */
  thinkingOpen: boolean;
  /** Everything outside the thinking sections, its pieces joined as paragraphs. */
  answer: string;
}

const THINK_OPEN = '<think>';
const THINK_CLOSE = '</think>';

/** Split every `<think>...</think>` (as reasoning models emit it) from the answer, also
 * mid-stream. A model can think more than once in one answer: gpt-oss's analysis messages
 * between its commentary and its final answer, Qwen3 between tool calls. A `</think>` with no
 * `<think>` before it is answer text. A tag counts wherever it is, inside a code span too, as
 * read aloud finds them (`crates/app/src/read_aloud/text.rs`). */
export function splitThinking(content: string): ThinkingSplit {
  const thinking: string[] = [];
  const answer: string[] = [];
  let at = 0;
  for (;;) {
    const start = content.indexOf(THINK_OPEN, at);
    if (start === -1) {
      answer.push(content.slice(at));
      break;
    }
    answer.push(content.slice(at, start));
    const from = start + THINK_OPEN.length;
    const end = content.indexOf(THINK_CLOSE, from);
    if (end === -1) {
      thinking.push(content.slice(from).trim());
      return { thinking, thinkingOpen: true, answer: joinPieces(answer) };
    }
    const part = content.slice(from, end).trim();
    if (part) thinking.push(part);
    at = end + THINK_CLOSE.length;
  }
  return { thinking, thinkingOpen: false, answer: joinPieces(answer) };
}

/** The answer's pieces (between thinking sections) as paragraphs of one answer. */
function joinPieces(pieces: string[]): string {
  return pieces
    .map((piece) => piece.trim())
    .filter((piece) => piece)
    .join('\n\n');
}
