import { describe, expect, it } from 'vitest';
import { renderMarkdown, splitThinking } from './markdown';

describe('renderMarkdown', () => {
  it('renders code blocks and emphasis', () => {
    const html = renderMarkdown('Some **bold** text\n\n```rust\nfn main() {}\n```');
    expect(html).toContain('<strong>bold</strong>');
    expect(html).toContain('<pre><code class="hljs language-rust"><span class="hljs-keyword">fn</span>');
  });

  it('colours code of known languages (aliases too) and leaves others plain and escaped', () => {
    expect(renderMarkdown('```py\nprint("hi")\n```')).toContain('class="hljs language-python"');
    const plain = renderMarkdown('```klingon\n<b>qapla</b>\n```');
    expect(plain).toContain('<pre><code>&lt;b&gt;qapla&lt;/b&gt;');
    const tricky = renderMarkdown('```js\nconst s = "<img src=x onerror=alert(1)>";\n```');
    const dom = document.createElement('div');
    dom.innerHTML = tricky;
    expect(dom.querySelectorAll('img, [onerror]').length).toBe(0);
    expect(dom.textContent).toContain('<img src=x onerror=alert(1)>');
  });

  it('never keeps script, event handlers or javascript: urls', () => {
    const html = renderMarkdown(
      '<script>alert(1)</script><img src=x onerror="alert(2)"><a href="javascript:alert(3)">x</a><div onclick="alert(4)">y</div>',
    );
    const dom = document.createElement('div');
    dom.innerHTML = html;
    expect(dom.querySelectorAll('script, img, div, [href], [onerror], [onclick]').length).toBe(0);
    expect(html).toContain('&lt;script&gt;');
  });

  it('keeps raw HTML as visible text', () => {
    expect(renderMarkdown('a <b>b</b>')).toContain('a &lt;b&gt;b&lt;/b&gt;');
  });

  it('loads no remote image: shows its description instead', () => {
    const html = renderMarkdown('![a cat](https://example.invalid/cat.png)');
    expect(html).not.toContain('<img');
    expect(html).not.toContain('example.invalid');
    expect(html).toContain('[image: a cat]');
  });

  it('turns links into inert text that shows the target', () => {
    const html = renderMarkdown('[docs](https://example.invalid/docs)');
    expect(html).not.toContain('href');
    expect(html).toContain('title="https://example.invalid/docs"');
  });

  it('drops style, iframes and forms', () => {
    const html = renderMarkdown('<style>body{}</style><iframe src="x"></iframe><form><input></form><p style="color:red">t</p>');
    expect(html).not.toMatch(/<style|<iframe|<form|<input|<p style/i);
  });
});

describe('splitThinking', () => {
  it('folds a finished thinking section', () => {
    expect(splitThinking('<think>\nplan\n</think>\n\nAnswer')).toEqual({ thinking: ['plan'], thinkingOpen: false, answer: 'Answer' });
  });

  it('handles a thinking section still streaming', () => {
    expect(splitThinking('<think>half a tho')).toEqual({ thinking: ['half a tho'], thinkingOpen: true, answer: '' });
    expect(splitThinking('<think>')).toEqual({ thinking: [''], thinkingOpen: true, answer: '' });
  });

  it('leaves plain answers alone', () => {
    expect(splitThinking('just text')).toEqual({ thinking: [], thinkingOpen: false, answer: 'just text' });
  });

  it('folds every thinking section, in order, the answer being all the text between and around them', () => {
    // gpt-oss: analysis, a commentary preamble, analysis again, the final answer.
    expect(splitThinking('<think>first</think>Let me check.<think>second</think>It is 42.')).toEqual({
      thinking: ['first', 'second'],
      thinkingOpen: false,
      answer: 'Let me check.\n\nIt is 42.',
    });
    expect(splitThinking('Intro\n<think>a</think>\nmiddle\n<think>b</think>\n<think>c</think>end')).toEqual({
      thinking: ['a', 'b', 'c'],
      thinkingOpen: false,
      answer: 'Intro\n\nmiddle\n\nend',
    });
  });

  it('keeps an open second section open, with the answer so far', () => {
    expect(splitThinking('<think>first</think>Let me check.<think>now the sec')).toEqual({
      thinking: ['first', 'now the sec'],
      thinkingOpen: true,
      answer: 'Let me check.',
    });
    // The tag itself still arriving: its start is shown until it is whole (as before).
    expect(splitThinking('<think>first</think>Done.<thi').thinkingOpen).toBe(false);
  });

  it('leaves out closed empty sections', () => {
    expect(splitThinking('<think>\n\n</think>\n\nAnswer')).toEqual({ thinking: [], thinkingOpen: false, answer: 'Answer' });
  });

  it('never lets a stray </think> eat text', () => {
    expect(splitThinking('no plan</think>Answer')).toEqual({ thinking: [], thinkingOpen: false, answer: 'no plan</think>Answer' });
    expect(splitThinking('<think>plan</think>one</think>two')).toEqual({
      thinking: ['plan'],
      thinkingOpen: false,
      answer: 'one</think>two',
    });
  });
});
