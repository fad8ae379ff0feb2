// The app's words in the user's language: one catalog per language (en.ts is the source of the
// keys; the others are typed against it, so a missing key fails svelte-check), `t` to look a
// message up with its parameters, and the language in use as reactive state, so every `t(…)`
// in markup follows a change of language at once. Messages are ICU MessageFormat, formatted by
// FormatJS's intl-messageformat (plurals by Intl.PluralRules); a number given to a plain `{name}`
// is written for the language with Intl.NumberFormat.
import { IntlMessageFormat } from 'intl-messageformat';
import { TYPE, type MessageFormatElement } from '@formatjs/icu-messageformat-parser';
import { en, type MessageKey } from './en';
import { zh } from './zh';
import { es } from './es';
import { de } from './de';
import { fr } from './fr';
import type { Catalog } from './message';

/** The languages Hearth ships, by their code in the settings. */
export const CATALOGS = { en, zh, es, de, fr } satisfies Record<string, Catalog>;
export type LanguageCode = keyof typeof CATALOGS;
export const LANGUAGE_CODES = Object.keys(CATALOGS) as LanguageCode[];

/** Each language's name in itself, for the language setting. */
export const LANGUAGE_NAMES: Record<LanguageCode, string> = {
  en: 'English',
  zh: '简体中文',
  es: 'Español',
  de: 'Deutsch',
  fr: 'Français',
};

/** The BCP 47 tag Intl formats numbers and dates with, per language. */
const INTL_TAGS: Record<LanguageCode, string> = { en: 'en', zh: 'zh-CN', es: 'es', de: 'de', fr: 'fr' };

const state = $state<{ language: LanguageCode }>({ language: 'en' });

/** The language in use. */
export function language(): LanguageCode {
  return state.language;
}

/** The tag for Intl (`new Intl.NumberFormat(locale())`). */
export function locale(): string {
  return INTL_TAGS[state.language];
}

/** Use `code`; anything Hearth does not ship falls back to English. */
export function setLanguage(code: string | null | undefined): void {
  const known = code != null && code in CATALOGS;
  state.language = known ? (code as LanguageCode) : 'en';
  if (typeof document !== 'undefined') document.documentElement.lang = INTL_TAGS[state.language];
}

export type Params = Record<string, string | number>;

/** A parsed message and the parameters it shows as plain `{name}` (not as a plural's count). */
type Compiled = { format: IntlMessageFormat; plain: Set<string> };
const compiled = new Map<string, Compiled>();

/** The names of `{name}` arguments in `elements`, and of those that choose (plural, select…). */
function argumentNames(elements: MessageFormatElement[], plain: Set<string>, choosing: Set<string>): void {
  for (const el of elements) {
    if (el.type === TYPE.argument) plain.add(el.value);
    else if (el.type === TYPE.plural || el.type === TYPE.select) {
      choosing.add(el.value);
      for (const option of Object.values(el.options)) argumentNames(option.value, plain, choosing);
    } else if (el.type === TYPE.number || el.type === TYPE.date || el.type === TYPE.time) choosing.add(el.value);
    else if (el.type === TYPE.tag) argumentNames(el.children, plain, choosing);
  }
}

/** Parse `text` once per language (tags are text: a catalog holds no markup). */
export function compile(code: LanguageCode, text: string): Compiled {
  const id = `${code}\u0000${text}`;
  let found = compiled.get(id);
  if (!found) {
    const format = new IntlMessageFormat(text, INTL_TAGS[code], undefined, { ignoreTag: true });
    const plain = new Set<string>();
    const choosing = new Set<string>();
    argumentNames(format.getAst(), plain, choosing);
    for (const name of choosing) plain.delete(name);
    found = { format, plain };
    compiled.set(id, found);
  }
  return found;
}

/** The message `key` in the language in use, its parameters filled. */
export function t(key: MessageKey, params?: Params): string {
  return translate(state.language, key, params);
}

/** `t` in a given language (tests, and the language setting's own labels). */
export function translate(code: LanguageCode, key: MessageKey, params?: Params): string {
  return formatMessage(code, (CATALOGS[code] as Catalog)[key] ?? en[key], params);
}

/** Format an ICU `text` in language `code`; numbers shown as plain `{name}` are written for it. */
export function formatMessage(code: LanguageCode, text: string, params?: Params): string {
  const { format, plain } = compile(code, text);
  if (!params) return String(format.format());
  const numbers = new Intl.NumberFormat(INTL_TAGS[code]);
  const values: Params = {};
  for (const [name, value] of Object.entries(params)) {
    values[name] = typeof value === 'number' && plain.has(name) ? numbers.format(value) : value;
  }
  return String(format.format(values));
}

/** Whether the catalog has `key` (for codes that come from the backend). */
export function hasMessage(key: string): key is MessageKey {
  return key in en;
}
