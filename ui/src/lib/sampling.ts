// The sampling fields as people see them: plain labels, their ranges (the engine's, see
// crates/chat/src/settings.rs clamp_sampling), and what a value out of range gets told.
import type { Sampling } from './types';

/** The engine's defaults (hearth-engine SamplingParams::default, ConversationSettings). */
export const DEFAULT_SAMPLING: Sampling = { temperature: 0.7, top_k: 40, top_p: 0.95, min_p: 0.05, repetition_penalty: 1, seed: 0 };
export const DEFAULT_MAX_TOKENS = 1024;

export type FieldKey = keyof Sampling | 'max_tokens';

export interface Field {
  key: FieldKey;
  label: string;
  help: string;
  min: number;
  max: number;
  step: number;
  integer: boolean;
}

export const SAMPLING_FIELDS: Field[] = [
  { key: 'temperature', label: 'Creativity', help: 'Temperature, 0 to 2. Lower gives steadier answers, higher more varied ones.', min: 0, max: 2, step: 0.05, integer: false },
  { key: 'top_p', label: 'Word choice breadth', help: 'Top p, 0 to 1. How much of the likely words the model picks from.', min: 0, max: 1, step: 0.01, integer: false },
  { key: 'top_k', label: 'Candidates per word', help: 'Top k, 0 to 1000 (0: no limit).', min: 0, max: 1000, step: 1, integer: true },
  { key: 'min_p', label: 'Skip unlikely words', help: 'Min p, 0 to 1. Higher leaves out more unlikely words.', min: 0, max: 1, step: 0.01, integer: false },
  { key: 'repetition_penalty', label: 'Avoid repeating', help: 'Repetition penalty, 0.5 to 2 (1: off).', min: 0.5, max: 2, step: 0.01, integer: false },
  { key: 'seed', label: 'Fixed seed', help: '0: a new one for every answer, so Regenerate writes something new. Any other number repeats answers exactly.', min: 0, max: Number.MAX_SAFE_INTEGER, step: 1, integer: true },
  { key: 'max_tokens', label: 'Longest answer', help: 'In tokens (about ¾ of a word each), 1 to 32768.', min: 1, max: 32768, step: 1, integer: true },
];

/** The value typed into a field, or why it cannot be used (in plain words). */
export function checkField(key: FieldKey, raw: string): { value: number } | { problem: string } {
  const field = SAMPLING_FIELDS.find((f) => f.key === key);
  if (!field) return { problem: `Unknown setting ${key}.` };
  const value = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(value)) return { problem: `${field.label} needs a number.` };
  if (value < field.min || value > field.max) {
    return { problem: `${field.label} goes from ${field.min} to ${field.max}; ${raw.trim()} is ${value < field.min ? 'too low' : 'too high'}. The saved value is unchanged.` };
  }
  if (field.integer && !Number.isInteger(value)) return { problem: `${field.label} needs a whole number.` };
  return { value };
}
