// The app's settings (theme, text size, the defaults of new conversations, threads) as the
// backend keeps them. It talks to the backend only through its slice of `api`.
import type { Api } from './api';
import type { Settings, ShareStatus } from './types';
import type { Notifications } from './notifications.svelte';

export type SettingsApi = Pick<Api, 'getSettings' | 'saveSettings' | 'shareStatus' | 'startSharing' | 'stopSharing' | 'pickFolder'>;

export class SettingsStore {
  /** Null until read at start. */
  settings = $state<Settings | null>(null);
  /** "Let other apps on this computer use Hearth" (null until read). */
  sharing = $state<ShareStatus | null>(null);

  constructor(
    private readonly api: SettingsApi,
    private readonly notifications: Notifications,
  ) {}

  async load(): Promise<void> {
    try {
      this.settings = await this.api.getSettings();
      this.sharing = await this.api.shareStatus();
    } catch (error) {
      this.notifications.fail(error);
    }
  }

  /** Turns sharing on at `port`; a failure is thrown for the switch to show beside it. */
  async startSharing(port: number): Promise<ShareStatus> {
    this.sharing = await this.api.startSharing(port);
    return this.sharing;
  }

  async stopSharing(): Promise<ShareStatus> {
    this.sharing = await this.api.stopSharing();
    return this.sharing;
  }

  async save(settings: Settings): Promise<void> {
    try {
      this.settings = await this.api.saveSettings(settings);
    } catch (error) {
      this.notifications.fail(error);
    }
  }

  /** Saves `settings` for a field that shows its own error (Settings › NPU): a refusal is
   *  thrown for it to show, not toasted. */
  async saveOrThrow(settings: Settings): Promise<void> {
    this.settings = await this.api.saveSettings(settings);
  }

  /** Asks for a folder with the desktop's dialog; null when it is closed. */
  pickFolder(title: string): Promise<string | null> {
    return this.api.pickFolder(title);
  }
}
