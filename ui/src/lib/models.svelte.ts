// State of the Models view: the overview from the backend, live download progress, and the
// actions (download, pause, resume, cancel, delete, import, set default). The api is passed in,
// so tests can hand in a fake one.
import type {
  CatalogItem,
  InstalledModel,
  ModelsOverview,
  PullProgress,
  PullResult,
  Removed,
} from './models';
import { formatBytes } from './models';

/** The backend calls this store needs (a slice of `api`). */
export interface ModelsApi {
  modelsOverview: () => Promise<ModelsOverview>;
  pullModel: (query: string, onProgress: (p: PullProgress) => void) => Promise<PullResult>;
  pauseDownload: (name: string) => Promise<void>;
  cancelDownload: (name: string) => Promise<number>;
  removeModel: (name: string) => Promise<Removed>;
  importModel: (dir: string, name: string | null) => Promise<InstalledModel>;
  setDefaultModel: (name: string) => Promise<void>;
}

const ACTIVE = new Set(['resolving', 'downloading', 'retrying', 'validating', 'registering']);

export class ModelsStore {
  overview = $state<ModelsOverview | null>(null);
  /** Latest progress per model name, for downloads started or seen in this window. */
  progress = $state<Record<string, PullProgress>>({});
  /** Downloads started from this window and not finished. */
  running = $state<string[]>([]);
  error = $state<string | null>(null);
  notice = $state<string | null>(null);

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
  async download(query: string, name: string): Promise<void> {
    if (this.running.includes(name)) return;
    this.error = null;
    this.notice = null;
    this.running = [...this.running, name];
    try {
      const result = await this.api.pullModel(query, (p) => {
        this.progress = { ...this.progress, [name]: p };
      });
      if (result.outcome === 'installed' && result.model) {
        this.notice = `${result.model.name} is installed (${formatBytes(result.model.sizeBytes)}).`;
        this.onChanged();
      } else if (result.outcome === 'already_installed') {
        this.notice = `${name} was already installed.`;
      }
    } catch (e) {
      this.error = (e as Error).message;
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
      this.error = (e as Error).message;
    }
  }

  async cancel(name: string): Promise<void> {
    try {
      await this.api.cancelDownload(name);
      const { [name]: _gone, ...rest } = this.progress;
      this.progress = rest;
    } catch (e) {
      this.error = (e as Error).message;
    }
    await this.refresh();
  }

  async remove(name: string): Promise<void> {
    this.error = null;
    try {
      const removed = await this.api.removeModel(name);
      this.notice = `Deleted ${removed.name}: ${formatBytes(removed.freedBytes)} freed.`;
      this.onChanged();
    } catch (e) {
      this.error = (e as Error).message;
    }
    await this.refresh();
  }

  async importDir(dir: string, name: string | null): Promise<void> {
    this.error = null;
    try {
      const model = await this.api.importModel(dir, name);
      this.notice = `Imported ${model.name} (${formatBytes(model.sizeBytes)}).`;
      this.onChanged();
    } catch (e) {
      this.error = (e as Error).message;
    }
    await this.refresh();
  }

  async setDefault(name: string): Promise<void> {
    this.error = null;
    try {
      await this.api.setDefaultModel(name);
      this.notice = `${name} will open when Hearth starts.`;
    } catch (e) {
      this.error = (e as Error).message;
    }
    await this.refresh();
  }

  /** The catalog item installed under `name`, if any. */
  catalogFor(name: string): CatalogItem | undefined {
    return this.overview?.catalog.find((c) => c.entry.name === name);
  }
}
