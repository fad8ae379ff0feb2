import { describe, expect, it } from 'vitest';
import { entryFor, entryLabel, entryNumbers, groupSources, linkCitations, markerNumbers } from './citations';
import type { Source } from './bindings';
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

describe('the marker forms of issue 54', () => {
  function linked(markdown: string, numbers = [1, 2, 3]) {
    const root = document.createElement('div');
    root.innerHTML = renderMarkdown(markdown);
    const opened: number[] = [];
    const count = linkCitations(root, { numbers, onCite: (n) => opened.push(n) });
    const buttons = [...root.querySelectorAll('button.cite')] as HTMLButtonElement[];
    return { root, count, cites: buttons.map((b) => Number(b.dataset.cite)), buttons, opened };
  }

  it('links [1, 2], ranges, 【1】 and full-width digits, one button per number', () => {
    expect(linked('Rent [1, 2] and notice [3].').cites).toEqual([1, 2, 3]);
    expect(linked('All of [1-3].').cites).toEqual([1, 2, 3]);
    expect(linked('租金【1】，通知期【２，３】。').cites).toEqual([1, 2, 3]);
    expect(linked('见【1、2】').cites).toEqual([1, 2]);
    const { buttons, opened } = linked('Both [1][2].');
    expect(buttons.map((b) => b.textContent)).toEqual(['[1]', '[2]']);
    buttons[1].click();
    expect(opened).toEqual([2]);
  });

  it('leaves code, links, reference links, unknown numbers and non-markers as text', () => {
    expect(linked('```\nx[1]\n```\n\nand `y[2]`').count).toBe(0);
    const link = linked('See [1](https://example.com) here.');
    expect(link.count).toBe(0);
    expect(link.root.querySelector('a')?.textContent).toBe('1');
    expect(linked('See [the spec][1].').count).toBe(0);
    expect(linked('[0] [9] [12345] [1-100] [3-1] [1 2] [1,] [1】 【1]').count).toBe(0);
    const mixed = linked('Mixed [1, 9].');
    expect(mixed.cites).toEqual([1]);
    expect(mixed.root.textContent).toContain('[9]');
  });

  it('reads the numbers of a marker as the backend does', () => {
    expect(markerNumbers('1, 2')).toEqual([1, 2]);
    expect(markerNumbers('２－３'.replace('－', '-'))).toEqual([2, 3]);
    expect(markerNumbers('1-21')).toHaveLength(21);
    expect(markerNumbers('1-25')).toBeNull();
    expect(markerNumbers('3-1')).toBeNull();
  });
});

describe('the groups under an answer', () => {
  const base: Source = { number: 1, document_id: 1, name: 'spec.pdf', place: 'page 15', page: 15, section: 0, char_start: 0, char_end: 4, text: 'text', from_scan: false, used: 'cited', numbers: [1, 3], read_whole: false };

  it('puts cited entries first, then also read; an entry stands for all its numbers', () => {
    const sources: Source[] = [base, { ...base, number: 2, numbers: [], place: 'page 7', page: 7, used: 'also_read' }];
    const groups = groupSources(sources);
    expect(groups.cited.map((s) => s.number)).toEqual([1]);
    expect(groups.alsoRead.map((s) => s.number)).toEqual([2]);
    expect(entryNumbers(base)).toEqual([1, 3]);
    expect(entryFor(sources, 3)?.number).toBe(1);
    expect(entryFor(sources, 2)?.place).toBe('page 7');
    expect(entryLabel(base)).toBe('spec.pdf, page 15');
  });

  it('says a short file read whole once, and a greeting has no used group', () => {
    const whole: Source = { ...base, number: 4, numbers: [4, 5], place: '', page: null, used: 'also_read', read_whole: true, name: 'notes.md' };
    expect(entryLabel(whole)).toBe('Read whole: notes.md');
    const groups = groupSources([whole]);
    expect(groups.cited.length + groups.probable.length).toBe(0);
    // While the answer is written, and in sources saved before: only given, no group.
    const given = groupSources([{ ...base, used: 'given' }]);
    expect(given.cited.length + given.probable.length + given.alsoRead.length).toBe(0);
  });
});
