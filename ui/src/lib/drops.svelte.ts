// Files dropped on the window (or a folder picked), as the backend classified them (crates/app's
// drop.rs, once, for every front end): documents (loose, pictures of pages, or the files of a
// folder) are attached to the open conversation, a model is imported (the Models view opens to
// show it), and what Hearth cannot use (other files, folders holding nothing it reads) is said
// in plain words, with what each folder gave and skipped. The UI never sees a dropped file's
// path: it acts by the drop's token. It talks to the backend only through its slice of `api`.
import type { Api } from './api';
import type { Dropped, FolderReport, LeftFile } from './bindings';
import type { DocumentsStore } from './documents.svelte';
import type { ModelsStore } from './models.svelte';
import type { Notifications } from './notifications.svelte';
import type { PicturesStore } from './pictures.svelte';
import type { Shell } from './shell.svelte';
import { acceptedKinds } from './documents';
import { t } from './i18n/index.svelte';

export type DropsApi = Pick<Api, 'onFileDrag' | 'onDropped'>;

/** What a dropped file that is not acted on says, by why. */
const LEFT_KEYS = {
  model_with_documents: 'drop.leftModelWithDocuments',
  another_model: 'drop.leftAnotherModel',
  folder: 'drop.leftFolder',
  unknown: 'drop.leftUnknown',
} as const;

/** What a count of files skipped in a folder says, by why. */
const SKIP_KEYS = {
  not_document: 'drop.skip.not_document',
  too_large: 'drop.skip.too_large',
  hidden: 'drop.skip.hidden',
  link_outside: 'drop.skip.link_outside',
  repeated: 'drop.skip.repeated',
  unreadable: 'drop.skip.unreadable',
  not_a_file: 'drop.skip.not_a_file',
} as const;

/** What a bound that stopped the look through a folder says, by which. */
const CUT_KEYS = { files: 'drop.cut.files', depth: 'drop.cut.depth', bytes: 'drop.cut.bytes', entries: 'drop.cut.entries' } as const;

/** "Tax papers: 12 files attached; 3 skipped: 2 are not documents Hearth reads, 1 is too large."
 *  (nothing to say for a folder that gave no file: it is listed as left, with why). */
export function folderNote(folder: FolderReport): string | null {
  if (folder.files === 0) return null;
  const parts = [t('drop.folder', { name: folder.name, count: folder.files })];
  const skipped = folder.skipped.reduce((sum, s) => sum + s.count, 0);
  if (skipped > 0) {
    const reasons = folder.skipped.map((s) => t(SKIP_KEYS[s.why], { count: s.count })).join(', ');
    parts.push(t('drop.folderSkipped', { count: skipped, reasons }));
  }
  for (const cut of folder.cuts) parts.push(t(CUT_KEYS[cut.why], { limit: cut.why === 'bytes' ? Math.round(cut.limit / 1e6) : cut.limit }));
  return `${parts.join('; ')}.`;
}

/** What to tell the user about a drop beyond what the app then shows (an attached file, an
 *  import's progress): what each folder gave and skipped, what was not done and why; null when
 *  loose files were all taken. */
export function dropNote(drop: Dropped): string | null {
  const lines: string[] = [];
  if (drop.kind === 'neither' && drop.left.length > 0) lines.push(t('drop.neither', { kinds: acceptedKinds() }));
  for (const folder of drop.folders) {
    const note = folderNote(folder);
    if (note) lines.push(note);
  }
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
    /** Takes a drop of pictures for a model that sees them (else they are read as documents). */
    private readonly pictures?: Pick<PicturesStore, 'takeDropped'>,
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
    // A folder taken in full is news, not a warning.
    const fine = drop.left.length === 0 && drop.folders.every((f) => f.skipped.length === 0 && f.cuts.length === 0);
    if (note) this.notifications.toast(fine ? 'info' : 'warning', note);
    if (drop.token === null) return;
    if (drop.kind === 'documents') {
      if (await this.pictures?.takeDropped(drop.token, drop.names)) return;
      await this.documents.attachDropped(drop.token);
    } else if (drop.kind === 'model') {
      this.shell.view = 'models';
      await this.models.importDropped(drop.token, drop.names[0] ?? '');
    }
  }
}
