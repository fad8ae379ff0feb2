// Files dropped on the window, as the backend classified them (crates/app's drop.rs, once, for
// every front end): documents are attached to the open conversation, a model is imported (the
// Models view opens to show it), and what Hearth cannot use yet (pictures, other files, folders
// without a model) is said in plain words. The UI never sees a dropped file's path: it acts by
// the drop's token. It talks to the backend only through its slice of `api`.
import type { Api } from './api';
import type { Dropped, LeftFile } from './bindings';
import type { DocumentsStore } from './documents.svelte';
import type { ModelsStore } from './models.svelte';
import type { Notifications } from './notifications.svelte';
import type { Shell } from './shell.svelte';
import { acceptedKinds } from './documents';
import { t } from './i18n/index.svelte';

export type DropsApi = Pick<Api, 'onFileDrag' | 'onDropped'>;

/** What a dropped file that is not acted on says, by why. */
const LEFT_KEYS = {
  model_with_documents: 'drop.leftModelWithDocuments',
  another_model: 'drop.leftAnotherModel',
  picture: 'drop.leftPicture',
  folder: 'drop.leftFolder',
  unknown: 'drop.leftUnknown',
} as const;

/** What to tell the user about a drop beyond what the app then shows (an attached file, an
 *  import's progress): what was not done and why; null when everything was taken. */
export function dropNote(drop: Dropped): string | null {
  const lines: string[] = [];
  const names = drop.names.join(', ');
  if (drop.kind === 'picture') lines.push(t('drop.picture', { names, count: drop.names.length }));
  if (drop.kind === 'neither' && drop.left.length > 0) lines.push(t('drop.neither', { kinds: acceptedKinds() }));
  lines.push(...drop.left.map((file: LeftFile) => t(LEFT_KEYS[file.why], { name: file.name })));
  return lines.length > 0 ? lines.join(' ') : null;
}

export class Drops {
  /** Files are being dragged over the window (the overlay shows). */
  dragging = $state(false);

  constructor(
    private readonly api: DropsApi,
    private readonly documents: DocumentsStore,
    private readonly models: ModelsStore,
    private readonly shell: Shell,
    private readonly notifications: Notifications,
  ) {}

  /** Follows drags over the window and the drops the backend classified; resolves to the
   *  function that stops it. */
  watch(): Promise<() => void> {
    return Promise.all([
      this.api.onFileDrag((drag) => (this.dragging = drag === 'over')),
      this.api.onDropped((drop) => void this.take(drop)),
    ]).then((stops) => () => stops.forEach((stop) => stop()));
  }

  /** One drop, as the backend classified it. */
  async take(drop: Dropped): Promise<void> {
    this.dragging = false;
    const note = dropNote(drop);
    if (note) this.notifications.toast('warning', note);
    if (drop.token === null) return;
    if (drop.kind === 'documents') {
      await this.documents.attachDropped(drop.token);
    } else if (drop.kind === 'model') {
      this.shell.view = 'models';
      await this.models.importDropped(drop.token, drop.names[0] ?? '');
    }
  }
}
