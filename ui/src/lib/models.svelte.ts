// State of the Models view: the overview from the backend, live download progress, and the
// actions (download, pause, resume, cancel, delete, import (picked, typed, or dropped on the
// window: by the drop's token; a GGUF file is linked where it is), find a linked file again,
// set default). The api is passed in, so tests can hand in a fake one.
import { t } from './i18n/index.svelte';
import type { CatalogItem, FoundModel, ModelsOverview, PullProgress } from './models';
import { formatBytes } from './models';
import type { Api } from './api';
import type { InstalledModel } from './bindings';

/** The backend calls this store needs (a slice of `api`). */
export type ModelsApi = Pick<
  Api,
  | 'modelsOverview'
  | 'pullModel'
  | 'pauseDownload'
  | 'cancelDownload'
  | 'removeModel'
  | 'importModel'
  | 'importDropped'
  | 'setDefaultModel'
  | 'foundModels'
  | 'importFound'
  | 'pickModelFile'
  | 'pickFolder'
  | 'relinkModel'
>;

/** What the Models view says once a model was added: linked where it is, or copied/imported. */
function addedNotice(model: InstalledModel): string {
  return model.linked
    ? t('linked.added', { name: model.name, size: formatBytes(model.size_bytes) })
    : t('models.imported', { name: model.name, size: formatBytes(model.size_bytes) });
}

const ACTIVE = new Set(['resolving', 'downloading', 'retrying', 'validating', 'converting', 'registering']);

export class ModelsStore {
  overview = $state<ModelsOverview | null>(null);
  /** Latest progress per model name, for downloads started or seen in this window. */
  progress = $state<Record<string, PullProgress>>({});
  /** Downloads started from this window and not finished. */
  running = $state<string[]>([]);
  /** An error not tied to one model (the overview could not be read). */
  error = $state<string | null>(null);
  /** Why a download, pause, cancel or delete failed, by model name, shown on that model. */
  errors = $state<Record<string, string>>({});
  /** Why the last import failed, shown under the import form. */
  importError = $state<string | null>(null);
  /** The import running now (of the form, or of a drop): its path or name, and its latest
   *  progress (null: starting). */
  importRunning = $state<{ path: string; progress: PullProgress | null } | null>(null);
  notice = $state<string | null>(null);
  /** Models other programs keep on this computer; null until looked for. */
  found = $state<FoundModel[] | null>(null);
  /** Why looking for them failed. */
  foundError = $state<string | null>(null);
  /** Imports of found models running now, by path, with their latest progress (null: starting). */
  importing = $state<Record<string, PullProgress | null>>({});
  /** Why importing a found model failed, by path, shown on that model. */
  foundErrors = $state<Record<string, string>>({});

  constructor(
    private readonly api: ModelsApi,
    /** Called after the set of installed models changed (so the model picker refreshes). */
    private readonly onChanged: () => void = () => {},
  ) {}

  async refresh(): Promise<void> {
    try {
      this.overview = await this.api.modelsOverview();
    } catch (e) {
      this.error = (e as Error).message;
    }
  }

  /** Whether `name` is downloading now (here or in another window of this app). */
  isDownloading(name: string): boolean {
    if (this.running.includes(name)) return true;
    const p = this.progress[name];
    return (p !== undefined && ACTIVE.has(p.phase)) || (this.overview?.downloading.includes(name) ?? false);
  }

  /** Start or resume the download of `query`, installed as `name`. */
  private setError(name: string, error: unknown): void {
    this.errors = { ...this.errors, [name]: (error as Error).message ?? String(error) };
  }

  private clearError(name: string): void {
    const { [name]: _gone, ...rest } = this.errors;
    this.errors = rest;
  }

  async download(query: string, name: string): Promise<void> {
    if (this.running.includes(name)) return;
    this.clearError(name);
    this.notice = null;
    this.running = [...this.running, name];
    try {
      const result = await this.api.pullModel(query, (p) => {
        this.progress = { ...this.progress, [name]: p };
      });
      if (result.outcome === 'installed' && result.model) {
        this.notice = t('models.installedNotice', { name: result.model.name, size: formatBytes(result.model.size_bytes) });
        this.onChanged();
      } else if (result.outcome === 'already_installed') {
        this.notice = t('models.alreadyInstalled', { name });
      }
    } catch (e) {
      this.setError(name, e);
      const { [name]: _gone, ...rest } = this.progress;
      this.progress = rest;
    } finally {
      this.running = this.running.filter((n) => n !== name);
      await this.refresh();
    }
  }

  async pause(name: string): Promise<void> {
    try {
      await this.api.pauseDownload(name);
    } catch (e) {
      this.setError(name, e);
    }
  }

  async cancel(name: string): Promise<void> {
    try {
      await this.api.cancelDownload(name);
      const { [name]: _gone, ...rest } = this.progress;
      this.progress = rest;
    } catch (e) {
      this.setError(name, e);
    }
    await this.refresh();
  }

  async remove(name: string): Promise<void> {
    this.clearError(name);
    try {
      const removed = await this.api.removeModel(name);
      this.notice = t('models.deleted', { name: removed.name, size: formatBytes(removed.freed_bytes) });
      this.onChanged();
    } catch (e) {
      this.setError(name, e);
    }
    await this.refresh();
  }

  /** Import a GGUF file or a model folder; true when it was installed (the form then clears). */
  importPath(path: string, name: string | null): Promise<boolean> {
    return this.runImport(path, (onProgress) => this.api.importModel(path, name, onProgress));
  }

  /** Import the model dropped on the window (`shown`: its file or folder name), by the drop's token. */
  importDropped(token: string, shown: string): Promise<boolean> {
    return this.runImport(shown, (onProgress) => this.api.importDropped(token, onProgress));
  }

  /** One import at a time, its progress in `importRunning`; true when it was installed. */
  private async runImport(path: string, run: (onProgress: (p: PullProgress) => void) => Promise<InstalledModel>): Promise<boolean> {
    if (this.importRunning) return false;
    this.importError = null;
    this.notice = null;
    this.importRunning = { path, progress: null };
    let ok = false;
    try {
      const model = await run((p) => {
        if (this.importRunning) this.importRunning = { path, progress: p };
      });
      this.notice = addedNotice(model);
      this.onChanged();
      ok = true;
    } catch (e) {
      this.importError = (e as Error).message ?? String(e);
    } finally {
      this.importRunning = null;
    }
    await this.refresh();
    return ok;
  }

  async setDefault(name: string): Promise<void> {
    this.clearError(name);
    try {
      await this.api.setDefaultModel(name);
      this.notice = t('models.willOpen', { name });
      this.onChanged();
    } catch (e) {
      this.setError(name, e);
    }
    await this.refresh();
  }

  /** Look again for models other programs keep on this computer. */
  async refreshFound(): Promise<void> {
    this.foundError = null;
    try {
      this.found = await this.api.foundModels();
    } catch (e) {
      this.foundError = (e as Error).message;
    }
  }

  /** Import a found model under its suggested name; its error stays on it, for Retry. */
  async importFound(model: FoundModel): Promise<void> {
    if (model.path in this.importing) return;
    const { [model.path]: _gone, ...rest } = this.foundErrors;
    this.foundErrors = rest;
    this.notice = null;
    this.importing = { ...this.importing, [model.path]: null };
    try {
      const installed = await this.api.importFound(model.path, model.import_name, (p) => {
        if (model.path in this.importing) this.importing = { ...this.importing, [model.path]: p };
      });
      this.notice = addedNotice(installed);
      this.onChanged();
    } catch (e) {
      this.foundErrors = { ...this.foundErrors, [model.path]: (e as Error).message ?? String(e) };
    } finally {
      const { [model.path]: _done, ...left } = this.importing;
      this.importing = left;
      await this.refresh();
    }
  }

  /** "Find it": the GGUF file of the linked model `name`, moved or changed since it was added,
   *  picked again in the system's dialog and linked (the same model only: another file's error
   *  stays on the model). Nothing happens when the dialog is cancelled. */
  async findLinked(name: string): Promise<void> {
    this.clearError(name);
    this.notice = null;
    try {
      const path = await this.api.pickModelFile(t('linked.findDialog', { name }));
      if (!path) return;
      const model = await this.api.relinkModel(name, path);
      this.notice = t('linked.found', { name: model.name, file: model.linked?.file ?? path });
      this.onChanged();
    } catch (e) {
      this.setError(name, e);
    }
    await this.refresh();
  }

  /** A .gguf file or a model folder chosen in the system's dialog; null when cancelled. */
  pickImport(kind: 'file' | 'folder'): Promise<string | null> {
    return kind === 'file'
      ? this.api.pickModelFile(t('models.dialogFile'))
      : this.api.pickFolder(t('models.dialogFolder'));
  }

  /** The catalog item installed under `name`, if any. */
  catalogFor(name: string): CatalogItem | undefined {
    return this.overview?.catalog.find((c) => c.entry.name === name);
  }
}
