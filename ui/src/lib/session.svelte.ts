// The model session: the app's status (the loaded model, where its data lives, how long a
// message may be), the models on this computer, the one being loaded, the model picker's choice
// and its error, and the remote server whose models the picker also offers. It talks to the
// backend only through its slice of `api`.
import type { Api } from './api';
import type { AppStatus, BackendComparison, BackendKind, LocalModel, ModelLoading, ModelStatus, RemoteModel, RemoteServer } from './types';
import { plainError } from './errors';
import { type Memory, type Notifications, memoryInMap, messageOf } from './notifications.svelte';

/** The backend calls the session needs. */
export type SessionApi = Pick<
  Api,
  | 'appStatus'
  | 'listLocalModels'
  | 'selectModel'
  | 'tryOnNpuAnyway'
  | 'onModelLoading'
  | 'compareBackends'
  | 'setDefaultModel'
  | 'remoteServer'
  | 'saveRemoteServer'
  | 'testRemoteServer'
  | 'forgetRemoteServer'
>;

/** Fallback when the backend has not said how long a message may be. */
export const DEFAULT_MAX_MESSAGE_CHARS = 100_000;

const WELCOME_DISMISSED = 'hearth.welcome-dismissed';

export class ModelSession {
  status = $state<AppStatus | null>(null);
  models = $state<LocalModel[]>([]);
  /** The context length of the loaded model, as the last load or answer reported it. */
  contextLimit = $state(0);
  /** The saved remote server, if any, and the models it offered when last asked. */
  remote = $state<RemoteServer | null>(null);
  remoteModels = $state<RemoteModel[]>([]);
  /** Why the remote server's models could not be listed, in plain words. */
  remoteError = $state<string | null>(null);
  /** Why the model last chosen in the picker could not be opened. */
  pickerError = $state<string | null>(null);
  loadingModel = $state(false);
  /** The stage of a model being loaded (select_model's `model-loading` events). */
  modelLoading = $state<ModelLoading | null>(null);
  /** Whether the first-run card about the built-in model was closed (remembered). */
  welcomeDismissed = $state(false);

  /** Called after the user chose another model (what depends on where answers run follows). */
  private readonly chosen: (() => void)[] = [];

  constructor(
    private readonly api: SessionApi,
    private readonly notifications: Notifications,
    private readonly memory: Memory = memoryInMap(),
  ) {
    this.welcomeDismissed = memory.getItem(WELCOME_DISMISSED) === '1';
  }

  get model(): ModelStatus | null {
    return this.status?.model ?? null;
  }

  get maxMessageChars(): number {
    return this.status?.max_message_chars ?? DEFAULT_MAX_MESSAGE_CHARS;
  }

  /** At start: the status (its notices become toasts), the local models and the remote
   *  server's. False (and a toast says why) when the status could not be read. */
  async load(): Promise<boolean> {
    try {
      const status = await this.api.appStatus();
      this.status = status;
      // The built-in model has its own welcome card; the other notices show once as toasts.
      this.notifications.showNotices(
        status.notices.filter((n) => !(status.model?.builtin && /^No model is downloaded yet/.test(n.message))),
      );
      this.contextLimit = status.model?.context_length ?? 0;
      this.models = await this.api.listLocalModels();
      void this.refreshRemote();
      return true;
    } catch (error) {
      this.notifications.fail(error);
      return false;
    }
  }

  async refreshModels(): Promise<void> {
    try {
      this.models = await this.api.listLocalModels();
    } catch (error) {
      this.notifications.fail(error);
    }
  }

  /** The model an answer ran on (it may differ from the one loaded: a fallback, a load on demand). */
  answeredWith(model: ModelStatus): void {
    if (this.status) this.status = { ...this.status, model, model_error: null };
  }

  /** Close the picker's error and the status's model error. */
  dismissModelError(): void {
    this.pickerError = null;
    if (this.status) this.status.model_error = null;
  }

  dismissWelcome(): void {
    this.welcomeDismissed = true;
    this.memory.setItem(WELCOME_DISMISSED, '1');
  }

  /** Listens to the backend's `model-loading` events; resolves to the function that stops it. */
  watchLoading(): Promise<() => void> {
    return this.api.onModelLoading((loading) => this.onModelLoading(loading));
  }

  /** A `model-loading` event from the backend. */
  onModelLoading(loading: ModelLoading): void {
    // Ready, failed and stopped (FastFlowLM idle; it starts again with the next answer) all
    // mean nothing is loading now.
    const settled = loading.stage === 'ready' || loading.stage === 'failed' || loading.stage === 'stopped';
    this.modelLoading = settled ? null : loading;
  }

  /** Load `name` (on `backend`; null: the best one). `npuAnyway` tries the NPU with a model
   *  FastFlowLM is known to fail with, for testers ("Try on the NPU anyway"). The picker is
   *  disabled while an answer is written. */
  /** Calls `handler` each time the user's choice of model is loaded. */
  onModelChosen(handler: () => void): void {
    this.chosen.push(handler);
  }

  async selectModel(name: string, backend: BackendKind | null = null, npuAnyway = false): Promise<void> {
    if (this.loadingModel) return;
    this.loadingModel = true;
    // Until the backend's first event, say what is happening.
    if (backend === 'npu' || backend === 'cpu') {
      this.modelLoading = { model: name, backend, stage: 'starting', message: '' };
    }
    try {
      this.pickerError = null;
      const model = npuAnyway ? await this.api.tryOnNpuAnyway(name) : await this.api.selectModel(name, backend);
      if (this.status) this.status = { ...this.status, model, model_error: null };
      this.contextLimit = model.context_length;
      for (const handler of this.chosen) handler();
    } catch (error) {
      // Shown next to the picker, where the choice was made.
      this.pickerError = plainError(messageOf(error)).summary;
    } finally {
      this.loadingModel = false;
      this.modelLoading = null;
    }
  }

  /** The model opened when Hearth starts; the list shows the new default. */
  async setDefaultModel(name: string): Promise<void> {
    try {
      await this.api.setDefaultModel(name);
    } catch (error) {
      this.notifications.fail(error);
    }
    await this.refreshModels();
  }

  /** The same prompt on the NPU and on the processor (errors are thrown to the caller). */
  compareBackends(name: string, prompt: string): Promise<BackendComparison> {
    return this.api.compareBackends(name, prompt);
  }

  /** The saved remote server and, if one is set, the models it offers now. */
  async refreshRemote(): Promise<void> {
    try {
      this.remote = await this.api.remoteServer();
    } catch (error) {
      this.remoteError = messageOf(error);
      return;
    }
    if (!this.remote) {
      this.remoteModels = [];
      this.remoteError = null;
      return;
    }
    try {
      this.remoteModels = await this.api.testRemoteServer(this.remote.url, null);
      this.remoteError = null;
    } catch (error) {
      this.remoteModels = this.remote.model ? [unreached(this.remote, this.remote.model)] : [];
      this.remoteError = messageOf(error);
    }
  }

  /** The models of the server at `url` (apiKey null: the saved key); errors are thrown to the form. */
  testRemote(url: string, apiKey: string | null): Promise<RemoteModel[]> {
    return this.api.testRemoteServer(url, apiKey);
  }

  /** Save the remote server (see api.saveRemoteServer); errors are thrown to the form. A remote
   *  model in use is opened again when its "sees pictures" switch changed: its status follows. */
  async saveRemote(url: string, apiKey: string | null, model: string | null, seesPictures: string[] | null): Promise<void> {
    this.remote = await this.api.saveRemoteServer(url, apiKey, model, seesPictures);
    await this.refreshRemote();
    if (this.model?.backend_kind === 'remote') {
      const status = await this.api.appStatus();
      this.status = status;
      this.contextLimit = status.model?.context_length ?? 0;
    }
  }

  /** Forget the remote server; a remote model in use is closed, so reload the status. */
  async forgetRemote(): Promise<void> {
    await this.api.forgetRemoteServer();
    this.remote = null;
    this.remoteModels = [];
    this.remoteError = null;
    if (this.model?.backend_kind === 'remote') {
      const status = await this.api.appStatus();
      this.status = status;
      this.contextLimit = status.model?.context_length ?? 0;
    }
  }
}

/** The model last chosen on a server that cannot be reached now, as the picker lists it: it
 *  sees pictures when the user switched it on (the server's own word is not known). */
function unreached(server: RemoteServer, name: string): RemoteModel {
  const sees = server.sees_pictures.includes(name);
  return { name, server_sees: false, backend: { kind: 'remote', usable: true, reason: null, sees_pictures: sees } };
}
