// What the window shows: the page in the main area (only the chat has a composer) and the
// requests for the message box to take the focus.

/** The pages of the main area. */
export type View = 'chat' | 'models' | 'performance' | 'settings' | 'npu-help';

export class Shell {
  view = $state<View>('chat');
  /** Bumped whenever the message box should take the focus (start, new or opened conversation). */
  focusRequest = $state(0);

  /** Open `view`; asked again for the page already shown (not the chat), go back to the chat. */
  toggle(view: View): void {
    this.view = this.view === view && view !== 'chat' ? 'chat' : view;
  }

  /** The chat, with the focus in the message box. */
  showChat(): void {
    this.view = 'chat';
    this.focusComposer();
  }

  focusComposer(): void {
    this.focusRequest++;
  }
}
