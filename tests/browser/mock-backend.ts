// An in-memory stand-in for the Rust side, installed with mockIPC before the UI loads. It keeps
// conversations, streams answers over the Channel token by token (with a delay, so Stop can be
// tested), loads models onto a pretend NPU with `model-loading` events, answers the system
// dialogs, and can be steered from a test through window.__mock.
import { mockIPC } from '@tauri-apps/api/mocks';
import { emit } from '@tauri-apps/api/event';
import { modelsCommand } from './mock-models';
import { voiceCommand } from './mock-voice';
import { readAloudCommand } from './mock-read-aloud';
import { checkRemoteAccepted, documentsAfterAnswer, documentsBeforeAnswer, documentsCommand } from './mock-documents';
import { picturesCommand, picturesControl, savePictures } from './mock-pictures';

type Json = Record<string, any>;

interface MockControl {
  answer: string;
  tokenDelayMs: number;
  failStart: { code: string; message: string } | null;
  promptTokens: number;
  contextLimit: number;
  /** Models on this computer besides the demo (name -> whether the NPU can run it). */
  /** Models with an NPU entry: true runs there, false lacks FastFlowLM, 'known-issue' is a model
   *  FastFlowLM is known to fail with (loaded on the NPU only with npuAnyway). */
  npuModels: Record<string, boolean | 'known-issue'>;
  /** Models of npuModels FastFlowLM reads pictures with (the registry's `vlm` mark). */
  seeingModels: string[];
  /** Milliseconds select_model takes on the NPU. */
  npuLoadMs: number;
  /** Why answers end when not stopped ('end of turn', 'length limit', ...). */
  stopReason: string;
  /** Milliseconds the pretend model reads the prompt before its first word. On the processor it
   *  reports how far it has read after each chunk of 64 tokens, as the engine does; on the NPU and
   *  a remote server it says nothing until the first word. */
  prefillMs: number;
  /** Send a `fallback` event after this many tokens (null: never). */
  fallbackAfter: number | null;
  /** What the folder, file and save dialogs return (null: the user cancelled). */
  pickedFolder: string | null;
  pickedFile: string | null;
  /** The options the last open dialog was shown with (title, filters, directory). */
  lastDialog: Json | null;
  /** Tauri's event emitter, so a test can send what the shell sends (a file dropped). */
  emit: typeof emit;
  savePath: string | null;
  calls: { cmd: string; args: Json }[];
}

const control: MockControl = {
  answer: 'Hello! I am a **mock** answer.',
  tokenDelayMs: 15,
  failStart: null,
  promptTokens: 12,
  contextLimit: 512,
  npuModels: {},
  seeingModels: [],
  npuLoadMs: 300,
  fallbackAfter: null,
  stopReason: 'end of turn',
  prefillMs: 0,
  pickedFolder: '/home/ana/models/MyModel',
  pickedFile: '/home/ana/Downloads/SmolLM2-135M-Instruct.Q4_1.gguf',
  lastDialog: null,
  emit,
  savePath: '/home/ana/Documents/chat.md',
  calls: [],
};
(window as any).__mock = control;

const sampling = { temperature: 0.7, top_k: 40, top_p: 0.95, min_p: 0.05, repetition_penalty: 1, seed: 0 };
/** The one folder the mock treats as a Python environment holding FastFlowLM's bin/flm. */
const FLM_ENV = '/home/ana/fastflow-venv';
let settings: Json = { theme: 'light', font_size: 15, sampling, max_tokens: 256, system_prompt: '', read_answers: false };
const model = {
  name: 'demo', path: '/models/demo', family: 'llama', parameter_count: 1_200_000, context_length: 512,
  weight_format: 'q4nx', backend_kind: 'cpu', backend: 'cpu (avx2)', device: 'Mock CPU', kernel: 'avx2', builtin: 'demo', sha256: null,
  // Read through a getter: a test says whether the model in use sees (window.__mockPictures.sees).
  get sees_pictures() { return picturesControl.sees; },
};
// The model answering now: the demo, or a remote one after select_model with backend "remote".
let current: Json = model;
// The saved remote server (the key kept here, as remote.json would; never returned).
let remote: { url: string; host: string; model: string | null; key: string | null; sees: string[] } | null = null;
// The server's models; it says (as Ollama's /api/show would) that llava-remote sees pictures.
const remoteModels = ['qwen-remote', 'llama-remote'];
const serverSees = ['llava-remote'];
function remoteView() {
  return remote && { url: remote.url, host: remote.host, model: remote.model, has_key: remote.key !== null, sees_pictures: remote.sees };
}
/** Whether a remote model sees pictures: the server's word, or the saved switch. */
function remoteSeeing(name: string): boolean {
  return serverSees.includes(name) || (remote?.sees.includes(name) ?? false);
}
function remoteListing(url: string) {
  const same = remote?.url === url;
  const names = (window as any).__mockRemoteVision ? [...remoteModels, ...serverSees] : remoteModels;
  return names.map((name) => ({
    name,
    server_sees: serverSees.includes(name),
    backend: { kind: 'remote', usable: true, reason: null, sees_pictures: serverSees.includes(name) || (same && remoteSeeing(name)) },
  }));
}
function checkRemoteUrl(url: unknown): string {
  if (typeof url !== 'string' || !/^https?:\/\/[^/]+/.test(url)) fail('invalid_input', 'Type the server address starting with http:// or https://, for example http://192.168.1.20:8000.');
  return url.replace(/\/v1\/?$/, '').replace(/\/$/, '');
}
// "Let other apps on this computer use Hearth": off until started; port 11434 is taken by a
// pretend Ollama, so starting there falls back to a free port as the app does.
// window.__mockShareProblem set before start: it was left on and could not start again.
let sharing: Json = { on: false, url: null, wanted_port: 11434, port_taken: false, model: null, problem: null };
function shareCommand(cmd: string, args: Json): unknown {
  switch (cmd) {
    case 'share_status':
      if (!sharing.on && (window as any).__mockShareProblem) return { ...sharing, problem: (window as any).__mockShareProblem };
      return sharing;
    case 'start_sharing': {
      const taken = args.port === 11434;
      const port = taken ? 40123 : args.port;
      (window as any).__mockShareProblem = null;
      sharing = { on: true, url: `http://127.0.0.1:${port}`, wanted_port: args.port, port_taken: taken, model: current.name, problem: null };
      return sharing;
    }
    case 'stop_sharing':
      sharing = { on: false, url: null, wanted_port: sharing.wanted_port, port_taken: false, model: null, problem: null };
      return sharing;
  }
  return undefined;
}
function remoteCommand(cmd: string, args: Json): unknown {
  switch (cmd) {
    case 'remote_server':
      return remoteView();
    case 'test_remote_server': {
      const url = checkRemoteUrl(args.url);
      if (url.includes('nowhere')) fail('connection', `Nothing answers at ${url}. Check the address, and that the server is running and reachable from this computer.`);
      return remoteListing(url);
    }
    case 'save_remote_server': {
      const url = checkRemoteUrl(args.url);
      const host = url.replace(/^https?:\/\//, '');
      const same = remote?.host === host;
      const key = args.apiKey == null ? (same ? remote!.key : null) : args.apiKey.trim() || null;
      const sees = Array.isArray(args.seesPictures) ? args.seesPictures : same ? remote!.sees : [];
      remote = { url, host, model: args.model ?? (same ? remote!.model : null), key, sees };
      if (current.backend_kind === 'remote') current = { ...current, sees_pictures: remoteSeeing(current.name) };
      return remoteView();
    }
    case 'forget_remote_server':
      remote = null;
      if (current.backend_kind === 'remote') current = model;
      return null;
  }
  return undefined;
}
const conversations = new Map<string, Json>();
let nextId = 1;
let cancelled = false;
let busy = false;
const now = () => Math.floor(Date.now() / 1000);

function summary(c: Json, query: string) {
  return { id: c.id, title: c.title, created_at: c.created_at, updated_at: c.updated_at, message_count: c.messages.length, snippet: query ? c.title : null };
}

function fail(code: string, message: string): never {
  throw { code, message };
}

function get(id: unknown): Json {
  if (typeof id !== 'string') fail('invalid_input', 'id must be a string');
  const c = conversations.get(id);
  if (!c) fail('not_found', `conversations: there is no conversation with id ${id}`);
  return c;
}

// Edits keep the old branch, as the backend does: `c.hidden[id]` holds, for each version of an
// edited message that is not shown, that version and what followed it (messages and answer
// versions); each message's `branches` lists its versions, oldest first.

/** Every message of `c`, shown or kept in a hidden branch. */
function allMessages(c: Json): Json[] {
  return [...c.messages, ...Object.values(c.hidden as Record<string, Json>).flatMap((tail) => tail.messages)];
}

/** Hide what is shown from index `at` on, as the branch of the message there. */
function hideFrom(c: Json, at: number) {
  const messages = c.messages.slice(at);
  const ids = new Set(messages.map((m: Json) => m.id));
  c.hidden[messages[0].id] = { messages, versions: c.versions.filter((v: Json) => ids.has(v.message_id)) };
  c.messages = c.messages.slice(0, at);
  c.versions = c.versions.filter((v: Json) => !ids.has(v.message_id));
}

function showBranch(c: Json, messageId: unknown): Json {
  const target = allMessages(c).find((m) => m.id === messageId);
  if (!target) fail('not_found', `conversations: there is no message with id ${messageId} (it may have been deleted)`);
  const at = c.messages.findIndex((m: Json) => target.branches.includes(m.id) || m.id === messageId);
  if (at >= 0 && c.messages[at].id !== messageId) {
    hideFrom(c, at);
    const tail = c.hidden[messageId as number];
    delete c.hidden[messageId as number];
    c.messages.push(...tail.messages);
    c.versions.push(...tail.versions);
  }
  const { seq: _seq, pendingVersions: _pending, hidden: _hidden, ...shown } = c;
  return structuredClone(shown);
}

function tokensOf(text: string): string[] {
  return text.match(/\s*\S+|\s+/g) ?? [];
}

async function startAnswer(args: Json) {
  const c = get(args.conversationId);
  const channel = args.onEvent as { id: number };
  if (busy) fail('busy', 'An answer is already being written. Wait for it, or press Stop first.');
  if (control.failStart) {
    const f = control.failStart;
    control.failStart = null;
    fail(f.code, f.message);
  }
  checkRemoteAccepted(c.id);
  const action = args.action as Json;
  let user: Json | null = null;
  if (action.kind === 'send' || action.kind === 'edit') {
    if (typeof action.content !== 'string' || !action.content.trim()) fail('invalid_input', 'The message is empty. Type something first.');
    if (action.kind === 'send' && action.pictures?.length && !picturesControl.sees) {
      throw { code: 'unsupported', message: `${current.name} does not see pictures, so it cannot look at yours.`, detail: 'seesNoPictures', params: { model: current.name } };
    }
    const id = nextId++;
    const pictures = action.kind === 'send' ? savePictures(id, action.pictures) : [];
    user = { id, role: 'user', content: action.content, state: 'complete', receipt: null, created_at: now(), branches: [] as number[], pictures };
    if (action.kind === 'edit') {
      const at = c.messages.findIndex((m: Json) => m.id === action.message_id);
      if (at < 0 || c.messages[at].role !== 'user') fail('not_found', `There is no message ${action.message_id} of yours in this conversation to edit.`);
      const edited = c.messages[at];
      const branches = [...(edited.branches.length ? edited.branches : [edited.id]), user.id];
      for (const m of allMessages(c)) if (branches.includes(m.id)) m.branches = branches;
      user.branches = branches;
      // As the store does: an edited first message retitles a conversation the user did not rename.
      if (at === 0 && c.title === edited.content.slice(0, 60)) c.title = action.content.slice(0, 60);
      hideFrom(c, at);
    }
    c.messages.push(user);
    if (c.title === 'New conversation') c.title = action.content.slice(0, 60);
  } else if (action.kind === 'regenerate') {
    // As the backend does: the answers written again are kept as versions of the new one.
    const taken: Json[] = [];
    while (c.messages.length && c.messages[c.messages.length - 1].role === 'assistant') taken.unshift(c.messages.pop());
    c.pendingVersions = taken.flatMap((m: Json) => [
      ...c.versions.filter((v: Json) => v.message_id === m.id),
      ...(m.content.trim() ? [{ message_id: m.id, content: m.content, state: m.state, receipt: m.receipt, created_at: m.created_at }] : []),
    ]);
    c.versions = c.versions.filter((v: Json) => !taken.some((m) => m.id === v.message_id));
  } else if (action.kind === 'continue') {
    // As the backend does: only the last answer, and only on this computer's processor.
    const last = c.messages[c.messages.length - 1];
    if (!last || last.id !== action.message_id || last.role !== 'assistant') fail('invalid_input', 'Only the last answer of a conversation, cut short, can be continued.');
    if (current.backend_kind !== 'cpu') fail('unsupported', 'This model cannot write on inside its cut answer (it runs on a server or the NPU); ask it to go on in a new answer.');
  } else {
    fail('invalid_input', `unknown action ${JSON.stringify(action)}`);
  }
  const continued = action.kind === 'continue' ? c.messages[c.messages.length - 1] : null;
  const answer = continued ?? { id: nextId++, role: 'assistant', content: '', state: 'streaming', receipt: null as Json | null, created_at: now(), branches: [] as number[] };
  if (!continued) c.messages.push(answer);
  c.versions.push(...(c.pendingVersions ?? []).map((v: Json) => ({ ...v, message_id: answer.id })));
  c.pendingVersions = [];
  busy = true;
  cancelled = false;
  let index = 0;
  const send = (message: Json) => (window as any).__TAURI_INTERNALS__.runCallback(channel.id, { message, index: index++ });
  // As the store does: adding the messages makes it the latest conversation.
  c.updated_at = now();
  send({ event: 'started', data: { conversation: summary(c, ''), user_message: user, assistant_message: { ...answer }, prompt_tokens: control.promptTokens, context_limit: control.contextLimit, trimmed_messages: 0, model: current } });
  const started = performance.now();
  await documentsBeforeAnswer(c.id, send, answer.id);
  await readPrompt(send);
  let first = 0;
  let count = 0;
  for (const piece of tokensOf(control.answer)) {
    if (cancelled) break;
    await new Promise((r) => setTimeout(r, control.tokenDelayMs));
    if (cancelled) break;
    if (!first) first = performance.now();
    count++;
    answer.content += piece;
    send({ event: 'token', data: { text: piece } });
    if (control.fallbackAfter === count) {
      send({ event: 'fallback', data: { reason: 'The NPU stopped answering (FastFlowLM exited).', backend: 'cpu' } });
    }
    const secs = (performance.now() - first) / 1000;
    send({ event: 'stats', data: { generated_tokens: count, ttft_secs: (first - started) / 1000, tokens_per_second: count > 1 && secs > 0 ? (count - 1) / secs : null, elapsed_secs: (performance.now() - started) / 1000 } });
  }
  const decode = Math.max(0.001, (performance.now() - (first || started)) / 1000);
  answer.state = cancelled ? 'stopped' : 'complete';
  answer.receipt = {
    model_name: current.name, model_sha256: current.backend_kind === 'remote' ? null : 'ab12', backend_kind: current.backend_kind, backend: current.backend, device: current.device, runtime_version: null, counts_exact: true, backend_timings: null, prompt_tokens: control.promptTokens,
    generated_tokens: count, ttft_secs: ((first || started) - started) / 1000, decode_secs: decode,
    tokens_per_second: count > 1 ? (count - 1) / decode : 0, stop_reason: cancelled ? 'stopped' : control.stopReason, trimmed_messages: 0, finished_at: now(),
    energy: mockEnergy(count),
  };
  c.updated_at = now();
  busy = false;
  documentsAfterAnswer(c.id, send, answer.id);
  send({ event: 'done', data: { message: { ...answer } } });
  return null;
}

/** The prompt read before the first word: `reading` events chunk by chunk on the processor. */
async function readPrompt(send: (message: Json) => void) {
  const total = control.promptTokens;
  const chunks = current.backend_kind === 'cpu' ? Math.ceil(total / 64) : 0;
  if (chunks === 0) {
    if (control.prefillMs) await new Promise((r) => setTimeout(r, control.prefillMs));
    return;
  }
  send({ event: 'reading', data: { done: 0, total } });
  for (let chunk = 1; chunk <= chunks && !cancelled; chunk++) {
    await new Promise((r) => setTimeout(r, control.prefillMs / chunks));
    send({ event: 'reading', data: { done: Math.min(total, chunk * 64), total } });
  }
}

// NPU area: the doctor's answer for the fixture laptop tests/fixtures/npu/strix-ready (a test may
// put another diagnosis in window.__mockNpu), power readings that vary, and energy on receipts.
const npuReady = {
  ready: true, summary: 'NPU ready: NPU Strix (XDNA 2)', detection: { state: 'found' },
  checks: [
    { id: 'device', status: 'ok', summary: 'NPU found: NPU Strix (XDNA 2) at PCI 0000:c5:00.1, driver amdxdna', fix: null },
    { id: 'memlock', status: 'ok', summary: 'Locked-memory limit is unlimited', fix: null },
  ],
};
let powerTick = 0;
function powerSample() {
  powerTick++;
  // window.__mockNoSensor = true (before the app starts): a computer with no power sensor.
  if ((window as any).__mockNoSensor) {
    const none = { unavailable: 'no amdgpu hwmon in /sys/class/hwmon; no amdgpu gpu_metrics file' };
    return { t_secs: 0, npu_watts: none, npu_percent: none, package_watts: none, battery_watts: { unavailable: 'no battery' }, cpu_percent: { value: 20, source: '/proc/stat' }, igpu_percent: none };
  }
  return {
    t_secs: 0,
    npu_watts: { value: 1.5 + (powerTick % 3) / 10, source: 'amdgpu gpu_metrics (card1) average_ipu_power' },
    npu_percent: { value: 45, source: 'amdgpu gpu_metrics (card1) average_ipu_activity' },
    package_watts: { value: 12 + (powerTick % 5), source: 'amdgpu hwmon4 power1_input (PPT)' },
    battery_watts: (window as any).__mockBattery ? { value: 15, source: 'BAT0 power_now' } : { unavailable: 'on mains power (BAT0 is charging)' },
    cpu_percent: { value: 20, source: '/proc/stat' },
    igpu_percent: { value: 3, source: 'amdgpu gpu_metrics (card1) average_gfx_activity' },
  };
}
function mockEnergy(tokens: number) {
  return {
    prefill_secs: 0.2, decode_secs: 1, prompt_tokens: control.promptTokens, generated_tokens: tokens, meter: 'package',
    source: 'package power: amdgpu hwmon4 power1_input (PPT)', prefill_joules: 2.5, decode_joules: 14,
    total_joules: 16.5, joules_per_1000_tokens: tokens ? (16.5 * 1000) / tokens : null,
    meters: [
      { meter: 'package', source: 'amdgpu hwmon4 power1_input (PPT)', prefill_joules: 2.5, decode_joules: 14, total_joules: 16.5, average_watts: 13.75, readings: 3 },
      { meter: 'npu', source: 'amdgpu gpu_metrics (card1) average_ipu_power', prefill_joules: 0.3, decode_joules: 1.6, total_joules: 1.9, average_watts: 1.6, readings: 3 },
    ],
    // window.__mockBattery = true: on battery, with a 60 Wh battery.
    battery: (window as any).__mockBattery ? { average_watts: 15, capacity_wh: 60, percent_per_hour: 25 } : null, samples: 3,
  };
}

/** select_model of a local model; on the NPU it takes a while and says so through events. */
async function loadLocal(name: string, backend: 'npu' | 'cpu', npuAnyway = false) {
  const stage = (s: string, message: string) => emit('model-loading', { model: name, backend, stage: s, message });
  if (backend === 'npu') {
    const npu = control.npuModels[name];
    if (npu === 'known-issue' && !npuAnyway) fail('npu', `${name} runs on the processor here: FastFlowLM is known to fail with it.`);
    if (!npu) fail('npu', 'This model cannot run on the NPU here: FastFlowLM is not installed.');
    await stage('starting', 'Starting FastFlowLM…');
    await new Promise((r) => setTimeout(r, control.npuLoadMs / 2));
    await stage('loading', 'Loading the weights onto the NPU (about 1.3 GB)…');
    await new Promise((r) => setTimeout(r, control.npuLoadMs / 2));
    await stage('ready', '');
  }
  current = {
    ...model, name, path: `/models/${name}`, builtin: null, context_length: 4096, sha256: 'cd34',
    backend_kind: backend, backend: backend === 'npu' ? 'npu-flm (FastFlowLM 0.9)' : 'cpu (avx2)', device: backend === 'npu' ? 'NPU Strix (XDNA 2)' : 'Mock CPU',
  };
  return current;
}

function compareBackends(args: Json) {
  const receipt = (kind: string, tps: number, ttft: number, joules: number) => ({
    model_name: args.name, model_sha256: 'cd34', backend_kind: kind, backend: kind, device: kind, runtime_version: null, counts_exact: true,
    backend_timings: null, prompt_tokens: 12, generated_tokens: 40, ttft_secs: ttft, decode_secs: 40 / tps, tokens_per_second: tps,
    stop_reason: 'end of turn', trimmed_messages: 0, finished_at: now(), energy: { ...mockEnergy(40), total_joules: joules },
  });
  return {
    npu: { text: 'Blue light scatters more.', receipt: receipt('npu', 21.5, 0.42, 4.1) },
    cpu: { text: 'Blue light scatters more.', receipt: receipt('cpu', 9.8, 0.9, 18.7) },
    texts_agree: true,
  };
}

mockIPC(async (cmd, raw) => {
  const args = (raw ?? {}) as Json;
  control.calls.push({ cmd, args: { ...args, onEvent: undefined } });
  switch (cmd) {
    case 'app_status':
      // window.__mockBuiltin = 'starter' (set before the app starts): the app bundles the starter.
      if ((window as any).__mockBuiltin === 'starter' && current === model) {
        current = { ...model, name: 'smollm2-135m', path: '/models/starter', builtin: 'starter', parameter_count: 134_515_008 };
      }
      return { model: current, model_error: null, notices: [{ level: 'info', message: current.builtin === 'starter' ? 'No model is downloaded yet, so Hearth opened SmolLM2-135M, the very small assistant that comes with it.' : 'No model is downloaded yet, so Hearth opened its tiny demo model.' }], data_dir: '/data', documents_dir: '/home/ana/Documents', max_message_chars: 100000, picture_limits: { max_pictures: 4, max_picture_bytes: 20 * 1024 * 1024 }, system_language: (window as any).__mockSystemLanguage ?? 'en' };
    case 'list_local_models':
      return [
        { name: current.builtin === 'starter' ? 'smollm2-135m' : 'demo', path: '/models/demo', builtin: current.builtin === 'starter' ? 'starter' : 'demo', is_default: true, backends: [{ kind: 'cpu', usable: true, reason: null }], selftest: null },
        ...Object.entries(control.npuModels).map(([name, usable]) => ({
          name, path: `/models/${name}`, builtin: null, is_default: false,
          backends: [
            ...(usable === true ? [{ kind: 'npu', usable: true, reason: null }]
              : usable === 'known-issue' ? [{ kind: 'npu', usable: false, reason: `${name} runs on the processor here: with FastFlowLM 1.0.6 on the NPU it fails at its first decode token (FastFlowLM issue 712, open). To try the NPU anyway: \`hearth run --npu-anyway\`, or "Try on the NPU anyway" in the app` }]
              : [{ kind: 'npu', usable: false, reason: 'FastFlowLM is not installed.' }]).map((npu) => ({ ...npu, sees_pictures: control.seeingModels.includes(name) })),
            { kind: 'cpu', usable: true, reason: null },
          ],
          selftest: usable === true ? { identical: 3, total: 3, summary: 'All 3 answers matched the processor word for word.' } : null,
        })),
      ];
    case 'select_model':
      if (args.backend === 'remote') {
        if (!remote) fail('not_found', 'No remote server is set. Add one in Settings, under Remote server.');
        if (!remoteModels.includes(args.name) && !serverSees.includes(args.name)) fail('model_not_found', `The server at ${remote.url} has no model named "${args.name}".`);
        remote.model = args.name;
        current = {
          name: args.name, path: '', family: 'remote', parameter_count: 0, context_length: 0, weight_format: '',
          backend_kind: 'remote', backend: `remote (${remote.url})`, device: remote.host, kernel: '', builtin: null, sha256: null,
          sees_pictures: remoteSeeing(args.name),
        };
        return current;
      }
      if (args.name === 'demo') {
        current = model;
        return model;
      }
      if (!(args.name in control.npuModels)) fail('not_found', `There is no model called "${args.name}" on this computer.`);
      return loadLocal(args.name, args.backend === 'npu' ? 'npu' : 'cpu', args.npuAnyway === true);
    case 'get_settings':
      return settings;
    case 'save_settings': {
      // As Settings::checked: a FastFlowLM environment must hold bin/flm (here, only this one).
      const env = args.settings.flm_python_env;
      if (env && env !== FLM_ENV) {
        throw { code: 'invalid_input', message: `${env} holds no FastFlowLM (there is no bin/flm in it). Choose the folder of the Python environment where pip install fastflow-sdk installed it, or clear the field.`, detail: 'flm_env_missing', params: { folder: env } };
      }
      settings = args.settings;
      return settings;
    }
    case 'list_conversations': {
      const q = String(args.query ?? '').toLowerCase();
      return [...conversations.values()]
        .filter((c) => !q || c.title.toLowerCase().includes(q) || c.messages.some((m: Json) => m.content.toLowerCase().includes(q)))
        .sort((a, b) => b.updated_at - a.updated_at || b.seq - a.seq)
        .map((c) => summary(c, q));
    }
    case 'create_conversation': {
      const id = `c${nextId++}`;
      const c = { id, seq: nextId, title: 'New conversation', created_at: now(), updated_at: now(), settings: { system_prompt: '', sampling, max_tokens: 256, enable_thinking: null }, messages: [], versions: [] as Json[], hidden: {} as Record<number, Json> };
      conversations.set(id, c);
      const { seq: _seq, hidden: _hidden, ...shown } = c;
      return structuredClone(shown);
    }
    case 'get_conversation': {
      const { seq: _seq, pendingVersions: _pending, hidden: _hidden, ...c } = get(args.id);
      return structuredClone(c);
    }
    case 'show_branch':
      if (busy) fail('busy', 'An answer is being written. Wait for it, or press Stop first.');
      return showBranch(get(args.conversationId), args.messageId);
    case 'rename_conversation':
      get(args.id).title = args.title; // the order is kept: updated_at does not change
      return null;
    case 'delete_conversation':
      get(args.id);
      conversations.delete(args.id);
      return null;
    case 'update_conversation_settings':
      get(args.id).settings = args.settings;
      return null;
    case 'export_conversation':
      get(args.id);
      return args.path ?? `/home/user/Downloads/export.${args.format === 'json' ? 'json' : 'md'}`;
    case 'plugin:dialog|open':
      control.lastDialog = args.options;
      return args.options?.directory ? control.pickedFolder : control.pickedFile;
    case 'plugin:dialog|save':
      control.lastDialog = args.options;
      return control.savePath;
    case 'compare_backends':
      return compareBackends(args);
    case 'start_answer':
      return startAnswer(args);
    case 'stop_answer':
      cancelled = true;
      return null;
    case 'npu_status':
      return (window as any).__mockNpu ?? npuReady;
    case 'power_sample':
      return powerSample();
    default: {
      const remoteAnswer = remoteCommand(cmd, args) ?? shareCommand(cmd, args) ?? readAloudCommand(cmd, args);
      if (remoteAnswer !== undefined) return remoteAnswer;
      const pictureAnswer = picturesCommand(cmd, args);
      if (pictureAnswer !== undefined) return pictureAnswer;
      const answer = modelsCommand(cmd, args);
      if (answer !== undefined) return answer;
      const documentsAnswer = documentsCommand(cmd, args);
      if (documentsAnswer !== undefined) return documentsAnswer;
      const voiceAnswer = voiceCommand(cmd, args);
      if (voiceAnswer !== undefined) return voiceAnswer;
      fail('unknown_command', `mock backend: unknown command ${cmd}`);
    }
  }
}, { shouldMockEvents: true });
