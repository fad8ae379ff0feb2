import { describe, expect, it } from 'vitest';
import { Notifications } from './notifications.svelte';

describe('Notifications', () => {
  it('shows info toasts for a while and remembers a closed notice', () => {
    const memory = new Map<string, string>();
    const timers: (() => void)[] = [];
    const storage = { getItem: (k: string) => memory.get(k) ?? null, setItem: (k: string, v: string) => void memory.set(k, v) };
    const notifications = new Notifications(storage, (fn) => void timers.push(fn));
    notifications.toast('info', 'Saved.');
    notifications.toast('warning', 'The database was recovered.');
    timers.forEach((fn) => fn());
    expect(notifications.toasts.map((t) => t.message)).toEqual(['The database was recovered.']);
    notifications.forgetNotice(notifications.toasts[0]);
    expect(JSON.parse(memory.get('hearth.dismissed-notices')!)).toEqual(['The database was recovered.']);
    // On the next start, the closed notice stays closed.
    const later = new Notifications(storage, () => {});
    later.showNotices([
      { level: 'warning', code: 'x', params: {}, message: 'The database was recovered.' },
      { level: 'info', code: 'x', params: {}, message: 'A new one.' },
    ]);
    expect(later.toasts.map((t) => t.message)).toEqual(['A new one.']);
  });
});
