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

/** An answer split into its (folded) thinking part and the visible answer. */
export interface ThinkingSplit {
  thinking: string | null;
  /** True while the model is still inside its thinking section. */
  thinkingOpen: boolean;
  answer: string;
}

/** Split `<think>...</think>` (as reasoning models emit it) from the answer, also mid-stream. */
export function splitThinking(content: string): ThinkingSplit {
  const start = content.indexOf('<think>');
  if (start === -1) return { thinking: null, thinkingOpen: false, answer: content };
  const before = content.slice(0, start);
  const rest = content.slice(start + '<think>'.length);
  const end = rest.indexOf('</think>');
  if (end === -1) {
    return { thinking: rest.trim(), thinkingOpen: true, answer: before.trim() };
  }
  const answer = (before + rest.slice(end + '</think>'.length)).trim();
  return { thinking: rest.slice(0, end).trim(), thinkingOpen: false, answer };
}
