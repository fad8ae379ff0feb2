// The notices shown as toasts in the corner: the backend's start-up notices (each closed one is
// remembered and not shown again) and whatever a store reports as failed. Every store reports
// its errors here; only Toasts.svelte shows them.
import type { Notice } from './types';
import { plainError } from './errors';
import { hasMessage, t } from './i18n/index.svelte';

/** How long an info toast stays before it closes by itself. */
export const TOAST_MS = 6000;

/** Where small UI choices are remembered (localStorage in the app, a Map in tests). */
export type Memory = Pick<Storage, 'getItem' | 'setItem'>;

/** A memory that forgets when the page closes (tests, and stores built without one). */
export function memoryInMap(): Memory {
  const map = new Map<string, string>();
  return { getItem: (k) => map.get(k) ?? null, setItem: (k, v) => void map.set(k, v) };
}

/** A transient notice in the corner; `details` holds the technical text, when there is one. */
export interface Toast {
  id: number;
  level: Notice['level'];
  message: string;
  details: string | null;
  /** What closing it remembers: a backend notice's English words (the same in every language). */
  key?: string;
}

/** A backend notice in the language in use: `notice.<code>` from the catalog, filled with its
 *  params, or its English words when the catalog lacks the code. */
export function noticeText(notice: Notice): string {
  const key = `notice.${notice.code}`;
  if (!hasMessage(key)) return notice.message;
  return t(key, Object.fromEntries(Object.entries(notice.params ?? {}).filter((e): e is [string, string] => e[1] !== undefined)));
}

/** An error's message, whatever was thrown. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

const DISMISSED = 'hearth.dismissed-notices';

export class Notifications {
  toasts = $state<Toast[]>([]);

  private nextToast = 1;

  constructor(
    private readonly memory: Memory = memoryInMap(),
    private readonly schedule: (fn: () => void, ms: number) => void = (fn, ms) => void setTimeout(fn, ms),
  ) {}

  /** Show a notice in the corner; info closes by itself, warnings and errors stay until closed. */
  toast(level: Notice['level'], message: string, details: string | null = null, key?: string): void {
    const id = this.nextToast++;
    this.toasts = [...this.toasts, { id, level, message, details, key }];
    if (level === 'info') this.schedule(() => this.dismiss(id), TOAST_MS);
  }

  /** A failed action: its plain-words summary, with the technical text as details. */
  fail(error: unknown): void {
    const { summary, details } = plainError(messageOf(error));
    this.toast('error', summary, details);
  }

  dismiss(id: number): void {
    this.toasts = this.toasts.filter((t) => t.id !== id);
  }

  /** The backend's notices, each shown once: a notice closed before (forgetNotice) stays closed. */
  showNotices(notices: Notice[]): void {
    const seen = this.dismissedNotices();
    for (const notice of notices) {
      if (!seen.includes(notice.message)) this.toast(notice.level, noticeText(notice), null, notice.message);
    }
  }

  /** Close a notice for good: the same text is not shown again on later starts. */
  forgetNotice(toast: Toast): void {
    this.dismiss(toast.id);
    const seen = this.dismissedNotices();
    const key = toast.key ?? toast.message;
    if (!seen.includes(key)) {
      this.memory.setItem(DISMISSED, JSON.stringify([...seen, key].slice(-50)));
    }
  }

  private dismissedNotices(): string[] {
    try {
      const parsed: unknown = JSON.parse(this.memory.getItem(DISMISSED) ?? '[]');
      return Array.isArray(parsed) ? parsed.filter((x): x is string => typeof x === 'string') : [];
    } catch {
      return [];
    }
  }
}
