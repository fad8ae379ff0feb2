import { describe, expect, it } from 'vitest';
import { linkCitations } from './citations';
import { renderMarkdown } from './markdown';

describe('linkCitations', () => {
  it('turns known [n] markers into buttons, not those in code or without a source', () => {
    const root = document.createElement('div');
    root.innerHTML = renderMarkdown('The rent is due monthly [1], late fees apply [2][3].\n\n`a[1]`');
    const opened: number[] = [];
    expect(linkCitations(root, { numbers: [1, 2], onCite: (n) => opened.push(n) })).toBe(2);
    const buttons = [...root.querySelectorAll('button.cite')] as HTMLButtonElement[];
    expect(buttons.map((b) => b.textContent)).toEqual(['[1]', '[2]']);
    expect(root.textContent).toContain('[3]');
    expect(root.querySelector('code')?.textContent).toBe('a[1]');
    buttons[1].click();
    expect(opened).toEqual([2]);
    // Linking again finds nothing new.
    expect(linkCitations(root, { numbers: [1, 2], onCite: () => {} })).toBe(0);
  });
});
