// The sampling fields as people see them: plain labels, their ranges (the engine's, see
// crates/chat/src/settings.rs clamp_sampling), and what a value out of range gets told.
import type { Sampling } from './types';
import type { MessageKey } from './i18n/en';
import { t } from './i18n/index.svelte';

/** The app's defaults for new conversations (crates/app/src/settings.rs: the engine's, with a
 *  mild repetition penalty, review #20). */
export const DEFAULT_SAMPLING: Sampling = { temperature: 0.7, top_k: 40, top_p: 0.95, min_p: 0.05, repetition_penalty: 1.1, seed: 0 };
export const DEFAULT_MAX_TOKENS = 1024;

export type FieldKey = keyof Sampling | 'max_tokens';

export interface Field {
  key: FieldKey;
  /** Catalog keys of the label and its help line. */
  label: MessageKey;
  help: MessageKey;
  min: number;
  max: number;
  step: number;
  integer: boolean;
}

export const SAMPLING_FIELDS: Field[] = [
  { key: 'temperature', label: 'sampling.temperature', help: 'sampling.temperatureHelp', min: 0, max: 2, step: 0.05, integer: false },
  { key: 'top_p', label: 'sampling.top_p', help: 'sampling.top_pHelp', min: 0, max: 1, step: 0.01, integer: false },
  { key: 'top_k', label: 'sampling.top_k', help: 'sampling.top_kHelp', min: 0, max: 1000, step: 1, integer: true },
  { key: 'min_p', label: 'sampling.min_p', help: 'sampling.min_pHelp', min: 0, max: 1, step: 0.01, integer: false },
  { key: 'repetition_penalty', label: 'sampling.repetition_penalty', help: 'sampling.repetition_penaltyHelp', min: 0.5, max: 2, step: 0.01, integer: false },
  { key: 'seed', label: 'sampling.seed', help: 'sampling.seedHelp', min: 0, max: Number.MAX_SAFE_INTEGER, step: 1, integer: true },
  { key: 'max_tokens', label: 'sampling.max_tokens', help: 'sampling.max_tokensHelp', min: 1, max: 32768, step: 1, integer: true },
];

/** The value typed into a field, or why it cannot be used (in plain words). */
export function checkField(key: FieldKey, raw: string): { value: number } | { problem: string } {
  const field = SAMPLING_FIELDS.find((f) => f.key === key);
  if (!field) throw new Error(`sampling: no field ${key}`);
  const label = t(field.label);
  const value = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(value)) return { problem: t('sampling.needsNumber', { label }) };
  if (value < field.min || value > field.max) {
    const params = { label, min: field.min, max: field.max, value: raw.trim() };
    return { problem: value < field.min ? t('sampling.tooLow', params) : t('sampling.tooHigh', params) };
  }
  if (field.integer && !Number.isInteger(value)) return { problem: t('sampling.needsWhole', { label }) };
  return { value };
}
