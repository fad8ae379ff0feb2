// The app's settings (theme, text size, the defaults of new conversations, threads) as the
// backend keeps them. It talks to the backend only through its slice of `api`.
import type { Api } from './api';
import type { Settings } from './types';
import type { Notifications } from './notifications.svelte';

export type SettingsApi = Pick<Api, 'getSettings' | 'saveSettings'>;

export class SettingsStore {
  /** Null until read at start. */
  settings = $state<Settings | null>(null);

  constructor(
    private readonly api: SettingsApi,
    private readonly notifications: Notifications,
  ) {}

  async load(): Promise<void> {
    try {
      this.settings = await this.api.getSettings();
    } catch (error) {
      this.notifications.fail(error);
    }
  }

  async save(settings: Settings): Promise<void> {
    try {
      this.settings = await this.api.saveSettings(settings);
    } catch (error) {
      this.notifications.fail(error);
    }
  }
}
