import { describe, expect, it } from 'vitest';
import { checkField } from './sampling';

describe('checkField', () => {
  it('explains a value out of range instead of clamping it', () => {
    expect(checkField('temperature', '9')).toEqual({
      problem: 'Creativity goes from 0 to 2; 9 is too high. The saved value is unchanged.',
    });
    expect(checkField('temperature', '0.4')).toEqual({ value: 0.4 });
  });

  it('refuses text and fractions where a whole number is needed', () => {
    expect(checkField('top_k', 'abc')).toEqual({ problem: 'Candidates per word needs a number.' });
    expect(checkField('max_tokens', '10.5')).toEqual({ problem: 'Longest answer needs a whole number.' });
  });
});
