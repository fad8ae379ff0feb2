// The Models area of the mocked backend: a two-model catalog, the bundled demo as installed,
// downloads that stream progress over the Channel (slowly, so Pause and Cancel can be tested),
// delete, import (by path, or a dropped model by its token) and default. A test can steer it
// through window.__mockModels.
import { takeDrop } from './mock-drops';

type Json = Record<string, any>;

const GB = 1_000_000_000;
const catalog = [
  {
    id: 'minicpm5-2b-npu2', name: 'MiniCPM5-2B-NPU2', tag: 'minicpm5-npu2:2b', repo: 'julianmb/MiniCPM5-2B-NPU2', revision: 'main',
    format: 'q4nx', kind: 'chat', download_bytes: 2.03 * GB, memory_bytes: 3 * GB, parameters: '2.5B', license: 'Apache-2.0', backends: ['npu', 'cpu'],
    context_length: 32768, think: true, flm_family: 'qwen3-it', quantization: 'Q4_1',
    description: 'Community NPU port of MiniCPM5-2B.', note: '',
  },
  {
    id: 'llama-3.2-1b-npu2', name: 'Llama-3.2-1B-NPU2', tag: 'llama3.2:1b', repo: 'FastFlowLM/Llama-3.2-1B-NPU2', revision: 'main',
    format: 'q4nx', kind: 'chat', download_bytes: 1.3 * GB, memory_bytes: 1.7 * GB, parameters: '1.2B', license: 'Llama 3.2 Community License', backends: ['npu', 'cpu'],
    context_length: 131072, think: false, flm_family: 'llama', quantization: 'AWQ-asym-uint4-g32',
    description: 'Small and quick.', note: '',
  },
];

export const modelsControl = {
  /** Milliseconds between progress messages. */
  stepMs: 40,
  /** Steps in a whole download. */
  steps: 25,
  /** Free disk reported (bytes). */
  freeDisk: 50 * GB,
  /** When set, the next download fails with this message (as the hub words a network error). */
  /** When set, the next download fails: a message (code network), or the whole error as Rust
   *  sends it ({ code, message, detail, params }). */
  failPull: null as string | Json | null,
  /** When set, the next import of a found model fails with this message. */
  failImportFound: null as string | null,
  /** More catalog entries (a test's models of other kinds, or twins), after the two above. */
  moreCatalog: [] as Json[],
  /** Puts a GGUF file linked where it lies among the installed models (issue 49), its file
   *  `state` ready, missing or changed. */
  addLinked(name: string, file: string, state: string) {
    installed.push({
      name, tag: `${name}:latest`, folder: `/models/${name}`, size_bytes: 9_761, source: `link:${file}`, repo: null, revision: null,
      catalog_id: null, format: 'gguf', backends: ['cpu'], is_default: false, builtin: false, files: {}, linked: { file, state },
    });
  },
};
(window as any).__mockModels = modelsControl;

const demo = {
  name: 'demo', tag: '', folder: '/models/demo', size_bytes: 2_400_000, source: 'built-in', repo: null, revision: null, catalog_id: null,
  format: 'q4nx', backends: ['cpu'], is_default: false, builtin: true, files: {},
};
const installed: Json[] = [demo];
const partial = new Map<string, Json>();
const running = new Map<string, { pause: boolean; cancel: boolean }>();
let defaultName: string | null = null;

/** Throws a command's error as the app sends it (crates/app/src/error.rs). */
function fail(code: string, message: string, detail: string | null = null, params: Json = {}): never {
  throw { code, message, detail, params };
}

/** The models a test put on this computer through window.__mock.npuModels (mock-backend.ts). */
function localOnly(): Json[] {
  const names = Object.keys((window as any).__mock?.npuModels ?? {});
  return names.filter((name) => !installed.some((i) => i.name === name)).map((name) => ({
    name, tag: '', folder: `/models/${name}`, size_bytes: 1.3 * GB, source: 'imported', repo: null, revision: null, catalog_id: null,
    format: 'q4nx', backends: ['npu', 'cpu'], is_default: false, builtin: false, files: {},
    sees_pictures: ((window as any).__mock?.seeingModels ?? []).includes(name),
  }));
}

function allCatalog(): Json[] {
  return [...catalog, ...modelsControl.moreCatalog];
}

function machine() {
  return { total_memory: 32 * GB, available_memory: 20 * GB, free_disk: modelsControl.freeDisk };
}

function overview() {
  const m = machine();
  return {
    machine: m,
    catalog: allCatalog().map((entry) => {
      const memory = entry.memory_bytes + 2 * GB <= m.total_memory;
      const disk = entry.download_bytes <= m.free_disk;
      return {
        entry,
        installed: installed.some((i) => i.name === entry.name),
        partial: partial.get(entry.name) ?? null,
        fit: { memory, disk, hint: disk ? `Fits: needs about ${entry.memory_bytes / GB} GB of memory` : 'Not enough free disk' },
      };
    }),
    // Speech models live in models/speech/, outside the registry's list (as in the app).
    installed: [...installed, ...localOnly()]
      .filter((i) => !allCatalog().some((e) => e.kind === 'speech' && e.name === i.name))
      .map((i) => ({ ...i, is_default: i.name === defaultName })),
    partial: [...partial.values()],
    downloading: [...running.keys()],
    copy_models: false,
  };
}

async function pull(args: Json) {
  const entry = allCatalog().find((c) => c.id === args.query || c.repo === args.query);
  if (!entry) fail('not_found', `hub: ${args.query} (revision main) was not found on the mock Hub.`);
  if (running.has(entry.name)) fail('busy', `hub: ${entry.name} is already being downloaded.`);
  if (modelsControl.failPull) {
    const failure = modelsControl.failPull;
    modelsControl.failPull = null;
    if (typeof failure !== 'string') throw failure;
    fail('network', failure);
  }
  if (installed.some((i) => i.name === entry.name)) return { outcome: 'already_installed', model: installed.find((i) => i.name === entry.name) };
  const channel = args.onProgress as { id: number };
  let index = 0;
  const send = (message: Json) => (window as any).__TAURI_INTERNALS__.runCallback(channel.id, { message, index: index++ });
  const flags = { pause: false, cancel: false };
  running.set(entry.name, flags);
  const total = entry.download_bytes;
  let done = partial.get(entry.name)?.done_bytes ?? 0;
  partial.delete(entry.name);
  const snapshot = (phase: string) => ({
    name: entry.name, phase, file: 'model.q4nx', files_done: 0, file_count: 4, done_bytes: done, total_bytes: total,
    bytes_per_sec: 25_000_000, eta_secs: (total - done) / 25_000_000, message: null,
  });
  send(snapshot('resolving'));
  try {
    while (done < total) {
      await new Promise((r) => setTimeout(r, modelsControl.stepMs));
      if (flags.cancel) {
        send(snapshot('cancelled'));
        return { outcome: 'cancelled', model: null };
      }
      if (flags.pause) {
        partial.set(entry.name, { name: entry.name, repo: entry.repo, query: entry.id, done_bytes: done, total_bytes: total });
        send(snapshot('paused'));
        return { outcome: 'paused', model: null };
      }
      done = Math.min(total, done + total / modelsControl.steps);
      send(snapshot('downloading'));
    }
    send(snapshot('validating'));
    const model = {
      name: entry.name, tag: entry.tag, folder: `/data/hearth/models/${entry.name}`, size_bytes: total, source: `huggingface:${entry.repo}@abc`,
      repo: entry.repo, revision: 'abc', catalog_id: entry.id, format: entry.format, backends: entry.backends, is_default: false, builtin: false, files: {},
      sees_pictures: entry.vlm === true,
    };
    installed.push(model);
    send(snapshot('done'));
    return { outcome: 'installed', model };
  } finally {
    running.delete(entry.name);
  }
}

// Models other programs keep (found_models): one Hearth can import, one it cannot.
const found = [
  {
    name: 'tiny:latest', import_name: 'tiny-latest', path: '/home/u/.ollama/models/blobs/sha256-ab', source: 'ollama',
    size_bytes: 800_000_000, architecture: 'llama', format: 'gguf', runnable: true, reason: null,
  },
  {
    name: 'gemma-3-1b', import_name: 'gemma-3-1b', path: '/home/u/.lmstudio/models/g/gemma-3-1b.gguf', source: 'lmstudio',
    size_bytes: 700_000_000, architecture: 'gemma3', format: 'gguf', runnable: false,
    reason: 'architecture "gemma3" is not one Hearth runs; it imports llama (Llama 3, SmolLM2, MiniCPM5) and qwen3 models',
  },
];

/** import_model: a .gguf path is converted (progress on the Channel) and installed under its
 *  file name; a folder fails as one without config.json does; a missing path says so. */
async function importModel(args: Json): Promise<Json> {
  const path = String(args.path ?? '');
  if (path.includes('missing')) fail('not_found', `There is nothing at ${path}. Check the path, or choose the file with Browse.`);
  if (!/\.gguf$/i.test(path)) {
    const missing = 'config.json, tokenizer.json, tokenizer_config.json, model.q4nx or model.safetensors';
    fail('invalid_model', `hub: ${path} does not hold a model Hearth can use: missing ${missing}. It has: notes.txt. Hearth needs config.json, tokenizer.json and the weights as model.q4nx or safetensors`, 'missing', { place: path, missing });
  }
  const name = args.name ?? path.split('/').pop()!.replace(/\.gguf$/i, '');
  if (installed.some((i) => i.name === name)) {
    fail('invalid_input', `hub: a model called ${name} is already installed. Remove it first (\`hearth rm ${name}\`) or choose another name`, 'name_taken', { name });
  }
  const channel = args.onProgress as { id: number };
  let index = 0;
  const total = 140_000_000;
  for (let i = 1; i <= 4; i++) {
    await new Promise((r) => setTimeout(r, modelsControl.stepMs * 3));
    (window as any).__TAURI_INTERNALS__.runCallback(channel.id, {
      message: { name, phase: 'converting', file: null, files_done: i, file_count: 4, done_bytes: (total * i) / 4, total_bytes: total, bytes_per_sec: 0, eta_secs: null, message: null },
      index: index++,
    });
  }
  const model = {
    name, tag: '', folder: `/data/hearth/models/${name}`, size_bytes: 90_000_000, source: `import:${path}`, repo: null, revision: null,
    catalog_id: null, format: 'q4nx', backends: ['cpu'], is_default: false, builtin: false, files: {},
  };
  installed.push(model);
  return model;
}

async function importFound(args: Json): Promise<Json> {
  const model = found.find((f) => f.path === args.path) ?? fail('storage', `hub: cannot open ${args.path}.`);
  if (modelsControl.failImportFound) {
    const message = modelsControl.failImportFound;
    modelsControl.failImportFound = null;
    fail('disk_full', message);
  }
  const channel = args.onProgress as { id: number };
  let index = 0;
  const send = (phase: string, done: number) =>
    (window as any).__TAURI_INTERNALS__.runCallback(channel.id, {
      message: {
        name: args.name, phase, file: null, files_done: 0, file_count: 0, done_bytes: done, total_bytes: model.size_bytes,
        bytes_per_sec: 0, eta_secs: null, message: null,
      },
      index: index++,
    });
  for (let i = 1; i <= 4; i++) {
    await new Promise((r) => setTimeout(r, modelsControl.stepMs));
    send('converting', (model.size_bytes * i) / 4);
  }
  const installedModel = {
    name: args.name, tag: 'tiny:latest', folder: `/data/hearth/models/${args.name}`, size_bytes: model.size_bytes,
    source: `import:${model.path}`, repo: null, revision: null, catalog_id: null, format: 'q4nx', backends: ['cpu'],
    is_default: false, builtin: false, files: {},
  };
  installed.push(installedModel);
  send('done', model.size_bytes);
  return installedModel;
}

/** Answers a Models command, or returns undefined for commands of other areas. */
export function modelsCommand(cmd: string, args: Json): unknown {
  switch (cmd) {
    case 'models_overview':
      return overview();
    case 'pull_model':
      return pull(args);
    case 'pause_download': {
      const flags = running.get(args.name) ?? fail('not_found', `"${args.name}" is not downloading now.`);
      flags.pause = true;
      return null;
    }
    case 'cancel_download': {
      const flags = running.get(args.name);
      if (flags) flags.cancel = true;
      partial.delete(args.name);
      return 0;
    }
    case 'remove_model': {
      const at = installed.findIndex((i) => i.name === args.name && !i.builtin);
      if (at < 0) fail('not_found', `hub: no installed model is called ${args.name}.`);
      const [removed] = installed.splice(at, 1);
      return { name: removed.name, freed_bytes: removed.size_bytes };
    }
    case 'import_model':
      return importModel(args);
    case 'import_dropped':
      return importModel({ path: `/home/ana/Downloads/${takeDrop(args.token, 'model')[0]}`, name: null, onProgress: args.onProgress });
    case 'found_models':
      return found;
    case 'import_found':
      return importFound(args);
    case 'relink_model': {
      // As the hub: the same model only (here, any path without "other" in it).
      const model = installed.find((i) => i.name === args.name && i.linked);
      if (!model) fail('not_found', `hub: no installed model is called ${args.name}.`);
      if (args.path.includes('other')) {
        fail('invalid_input', `hub: ${args.path} is a different file from the one ${args.name} was added from (its header is not the same), so ${args.name} was left as it was. Pick the file you added, or add this one as a new model`);
      }
      model!.linked = { file: args.path, state: 'ready' };
      model!.source = `link:${args.path}`;
      return model;
    }
    case 'set_default_model':
      if (!installed.some((i) => i.name === args.name)) fail('not_found', `hub: no installed model is called ${args.name}.`);
      defaultName = args.name;
      return null;
    default:
      return undefined;
  }
}
