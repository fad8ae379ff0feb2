// Errors in plain words. The backend's messages are written for people, but some come from the
// libraries below it with a subsystem prefix ("hub: …"), OS error numbers, environment variables
// or command-line wording. `plainError` gives a short sentence to show and keeps the original
// text as the details a user can unfold.

import { hasMessage, language, t } from './i18n/index.svelte';
import type { MessageKey } from './i18n/en';

export interface PlainError {
  /** One or two plain sentences. */
  summary: string;
  /** The original text, when it says more than the summary (shown under "Details"). */
  details: string | null;
}

// Known situations, first match wins: what the user can understand and do.
const KNOWN: [RegExp, MessageKey][] = [
  [
    /could not reach|failed to lookup|name or service not known|network is unreachable|connection (refused|reset|timed out)|dns error|timed out/i,
    'plain.offline',
  ],
  [/not enough free disk|no space left/i, 'error.disk_full'],
  [/no such file or directory|does not exist/i, 'plain.noFolder'],
  [/permission denied/i, 'plain.permission'],
  [/missing config\.json|does not hold a model|not a model folder/i, 'plain.notModel'],
  [/is already installed|name is taken/i, 'plain.nameTaken'],
  [/is not a model Hearth knows|was not found on|404/i, 'plain.unknownModel'],
  [/sha256|checksum|corrupt/i, 'plain.corrupt'],
];

/** Strip a library prefix ("hub: ", "engine: ") and OS error numbers; capitalize. */
function tidy(text: string): string {
  let t = text.trim().replace(/^[a-z][a-z0-9_-]*: /, '');
  t = t.replace(/ \(os error \d+\)/g, '');
  return t.charAt(0).toUpperCase() + t.slice(1);
}

export function plainError(raw: string): PlainError {
  const text = raw.trim();
  for (const [pattern, summary] of KNOWN) {
    if (pattern.test(text)) return { summary: t(summary), details: text };
  }
  const summary = tidy(text) || t('plain.unknown');
  return { summary, details: summary === text ? null : text };
}

/** What the backend sends for a failed command (crates/app/src/error.rs). */
export interface CodedError {
  code: string;
  message: string;
  detail?: string | null;
  params?: Partial<Record<string, string>>;
}

/** A backend error in the language in use, from the catalog: the message of its detail
 *  (`error.<code>.<detail>`, filled with its params) when it has one, else its code's
 *  (`error.<code>`). In English a code's message is Rust's own, which says more; a code or
 *  detail the catalog lacks keeps Rust's English message. */
export function errorText(error: CodedError): string {
  const params = Object.fromEntries(Object.entries(error.params ?? {}).filter((e): e is [string, string] => e[1] !== undefined));
  const specific = `error.${error.code}.${error.detail}`;
  if (error.detail && hasMessage(specific)) return t(specific, params);
  const general = `error.${error.code}`;
  if (language() !== 'en' && hasMessage(general)) return t(general);
  return error.message;
}

/** Why a file could not be read, as the backend sends it (crates/app's documents views). */
export interface FileError {
  code: string;
  params: Partial<Record<string, string>>;
  detail: string | null;
  message: string;
}

/** Every code the documents crate gives a file it cannot read (its `extract::error::CODES`),
 *  and the app's own `unreadable`: each has a sentence in every language's catalog. */
export const FILE_ERROR_CODES = [
  'cannot-open', 'folder', 'not-a-file', 'system-file', 'too-large', 'unknown-kind', 'password', 'drm',
  'scanned-ocr-off', 'scanned-no-ocr-program', 'scanned-no-ocr-language', 'ocr-failed', 'too-many-scanned-pages',
  'image-too-large', 'image-bomb', 'unsupported-image', 'no-text', 'damaged', 'zip-bomb', 'too-much-text',
  'too-complex', 'reader-stopped', 'cancelled', 'unreadable',
] as const;

/** Why a file could not be read, in one plain sentence of the language in use (by its code;
 *  the file's name is shown beside it, so the sentence does not repeat it). A code this UI does
 *  not know says only that the file could not be read: its English words go under Details. */
export function fileErrorText(error: FileError): string {
  const params = Object.fromEntries(Object.entries(error.params).filter((e): e is [string, string] => e[1] !== undefined));
  const key = `fileError.${error.code}`;
  return hasMessage(key) ? t(key, params) : t('fileError.unreadable', params);
}

/** What goes under a failed file's Details: the technical text (path, the parser's words),
 *  and the English sentence when the code was not one this UI knows. */
export function fileErrorDetails(error: FileError): string {
  const known = hasMessage(`fileError.${error.code}`) && error.code !== 'unreadable';
  return [error.detail, known ? null : error.message].filter((s, i, all): s is string => !!s && all.indexOf(s) === i).join('\n');
}
