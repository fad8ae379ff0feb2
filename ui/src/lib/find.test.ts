import { describe, expect, it } from 'vitest';
import { findRanges, markParts } from './find';

describe('find', () => {
  it('finds every match in the messages, ignoring case and the buttons', () => {
    const root = document.createElement('div');
    root.innerHTML =
      '<article><p>Bread needs flour. <strong>bread</strong> rises.</p><div class="actions"><button>Bread</button></div></article>' +
      '<article><div class="bubble">How do I bake BREAD?</div></article>';
    const ranges = findRanges(root, ' bread ');
    expect(ranges.map((r) => r.toString())).toEqual(['Bread', 'bread', 'BREAD']);
    expect(findRanges(root, '')).toEqual([]);
    expect(findRanges(root, 'cake')).toEqual([]);
  });

  it('marks the searched words in a snippet, without touching the rest', () => {
    expect(markParts('…le paysage de France…', 'paysage')).toEqual([
      { text: '…le ', match: false },
      { text: 'paysage', match: true },
      { text: ' de France…', match: false },
    ]);
    expect(markParts('a+b (c)', 'b (c')).toEqual([
      { text: 'a+', match: false },
      { text: 'b', match: true },
      { text: ' ', match: false },
      { text: '(c', match: true },
      { text: ')', match: false },
    ]);
    expect(markParts('text', '  ')).toEqual([{ text: 'text', match: false }]);
  });
});
