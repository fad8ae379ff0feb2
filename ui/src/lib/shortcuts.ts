// The app's keyboard shortcuts, listed once: the Shortcuts list shows them, App.svelte and the
// composer act on them.

export interface Shortcut {
  keys: string;
  does: string;
}

export const SHORTCUTS: Shortcut[] = [
  { keys: 'Enter', does: 'Send the message' },
  { keys: 'Shift+Enter', does: 'Start a new line in the message' },
  { keys: 'Escape', does: 'Stop the answer being written; close a menu, find or this list' },
  { keys: 'Ctrl+N', does: 'New conversation' },
  { keys: 'Ctrl+L', does: 'Go to the message box' },
  { keys: 'Ctrl+F', does: 'Find in this conversation (Enter: next, Shift+Enter: previous)' },
  { keys: 'Ctrl+,', does: 'Settings' },
  { keys: 'Ctrl+/', does: 'This list of shortcuts' },
  { keys: '↑ ↓ Home End', does: 'Move through an open menu' },
];
