// The app's keyboard shortcuts, listed once: the Shortcuts list shows them, App.svelte and the
// composer act on them.

import type { MessageKey } from './i18n/en';

export interface Shortcut {
  keys: string;
  /** What it does, as a catalog key. */
  does: MessageKey;
}

export const SHORTCUTS: Shortcut[] = [
  { keys: 'Enter', does: 'shortcut.send' },
  { keys: 'Shift+Enter', does: 'shortcut.newline' },
  { keys: 'Escape', does: 'shortcut.escape' },
  { keys: 'Ctrl+N', does: 'common.newConversation' },
  { keys: 'Ctrl+L', does: 'shortcut.focus' },
  { keys: 'Ctrl+F', does: 'shortcut.find' },
  { keys: 'Ctrl+,', does: 'common.settings' },
  { keys: 'Ctrl+/', does: 'shortcut.list' },
  { keys: 'Ctrl+Shift+M', does: 'shortcut.mic' },
  { keys: '↑ ↓ Home End', does: 'shortcut.menu' },
];
