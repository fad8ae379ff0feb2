// Generated from the Rust types by src-tauri/tests/bindings.rs (ts-rs): do not edit.
// After changing a type that crosses IPC, run `npm run bindings`.

/**
 * An earlier answer, kept when the answer was written again (Regenerate).
 */
export type AnswerVersion = { 
/**
 * The answer now shown in its place.
 */
message_id: number, 
/**
 * Its text.
 */
content: string, 
/**
 * Its state.
 */
state: MessageState, 
/**
 * How it was made.
 */
receipt: Receipt | null, 
/**
 * Unix seconds.
 */
created_at: number, };

/**
 * What a front end needs at start.
 */
export type AppStatus = { 
/**
 * The model in use, if any.
 */
model: ModelStatus | null, 
/**
 * Why no model is in use (its code for the front end's own words, and the English text).
 */
model_error: CommandError | null, 
/**
 * Notices not yet shown.
 */
notices: Array<Notice>, 
/**
 * Where Hearth keeps its data.
 */
data_dir: string, 
/**
 * Where a save dialog opens (Documents, else home), when there is a home folder.
 */
documents_dir: string | null, 
/**
 * The longest message, in characters.
 */
max_message_chars: number, 
/**
 * The bounds on a message's pictures.
 */
picture_limits: PictureLimits, 
/**
 * The desktop session's language (LC_ALL, LC_MESSAGES, LANG), for the setting "Automatic".
 */
system_language: Language, };

/**
 * Whether a backend can run a given model now, and why not when it cannot.
 */
export type Availability = { 
/**
 * Which backend.
 */
kind: BackendKind, 
/**
 * True when it can answer with this model now.
 */
usable: boolean, 
/**
 * Why not, in plain words with what to do (None when usable).
 */
reason: string | null, 
/**
 * Whether the model reads pictures given with a message on this backend: FastFlowLM's
 * `vlm` mark on the NPU, the server's word or the user's switch on a remote server, never
 * on the CPU engine (it reads text only). Said even when the backend is not usable now,
 * so that a model's card and the picker can tell which models see.
 */
sees_pictures: boolean, };

/**
 * Where a model can run.
 */
export type Backend = "cpu" | "npu";

/**
 * One prompt on the NPU and on the processor.
 */
export type BackendComparison = { 
/**
 * The answer on the NPU.
 */
npu: BackendRun, 
/**
 * The answer on the processor.
 */
cpu: BackendRun, 
/**
 * Whether both answered with the same text.
 */
texts_agree: boolean, };

/**
 * Where answers are computed.
 */
export type BackendKind = "cpu" | "npu" | "remote";

/**
 * One side of a comparison: the answer and its receipt, or why it failed.
 */
export type BackendRun = { 
/**
 * The answer.
 */
text: string, 
/**
 * Speed, time to first token, energy, where it ran.
 */
receipt: Receipt, } | { 
/**
 * What happened, in plain words.
 */
error: string, };

/**
 * Timing fields a backend reports itself (FastFlowLM's and Hearth's server's `usage`), next to
 * the wall-clock ones Hearth measures.
 */
export type BackendTimings = { 
/**
 * Seconds spent loading the model for this request.
 */
load_secs: number | null, 
/**
 * Seconds spent reading the prompt.
 */
prefill_secs: number | null, 
/**
 * Prompt tokens run through the model in those seconds; the others' keys and values were
 * kept from earlier turns (Hearth's engine keeps them, see its `kv_store`). None when the
 * backend does not say.
 */
prefill_tokens: number | null, 
/**
 * Prompt tokens read per second (of those run through the model).
 */
prefill_tokens_per_s: number | null, 
/**
 * Seconds spent writing the answer.
 */
decode_secs: number | null, 
/**
 * Answer tokens per second.
 */
decode_tokens_per_s: number | null, };

/**
 * Estimated battery use if generating went on for an hour.
 */
export type BatteryUse = { 
/**
 * Mean discharge power while generating, W.
 */
average_watts: number, 
/**
 * Full battery capacity, Wh.
 */
capacity_wh: number, 
/**
 * Percent of a full battery per hour of continuous generation.
 */
percent_per_hour: number, };

/**
 * Which model came with Hearth.
 */
export type BuiltinKind = "starter" | "demo";

/**
 * One model of the catalog.
 */
export type CatalogEntry = { 
/**
 * Short id users type: `hearth pull minicpm5-2b`.
 */
id: string, 
/**
 * Folder name once installed (and FastFlowLM's `name`).
 */
name: string, 
/**
 * FastFlowLM tag `family:size`, the two keys of its registry.
 */
tag: string, 
/**
 * Hugging Face repository `owner/name`.
 */
repo: string, 
/**
 * Branch, tag or commit to download.
 */
revision: string, 
/**
 * Weight format the repository holds.
 */
format: WeightFormat, 
/**
 * What it is for. By default, chat.
 */
kind: ModelKind, 
/**
 * Approximate download size in bytes (the exact size is read from the Hub).
 */
download_bytes: number, 
/**
 * Approximate memory needed to run it, in bytes.
 */
memory_bytes: number, 
/**
 * Parameter count as written by its authors ("2.5B").
 */
parameters: string, 
/**
 * License of the weights.
 */
license: string, 
/**
 * Where it runs.
 */
backends: Array<Backend>, 
/**
 * Context length FastFlowLM uses by default.
 */
context_length: number, 
/**
 * Whether the model can reason (`<think>`).
 */
think: boolean, 
/**
 * Whether FastFlowLM reads pictures with it (its catalog's `vlm`, a vision model): a pull
 * writes the mark into the registry, where the NPU backend looks for it before sending a
 * picture. Hearth's CPU engine reads text only. By default, no.
 */
vlm: boolean, 
/**
 * FastFlowLM's `details.family` (picks its engine).
 */
flm_family: string, 
/**
 * Quantization as FastFlowLM names it.
 */
quantization: string, 
/**
 * One sentence for the Models view.
 */
description: string, 
/**
 * Caveats worth reading before downloading (may be empty).
 */
note: string, };

/**
 * One catalog model as the Models view shows it.
 */
export type CatalogItem = { 
/**
 * The catalog entry.
 */
entry: CatalogEntry, 
/**
 * Installed (registered) under its name.
 */
installed: boolean, 
/**
 * A paused or interrupted download of it.
 */
partial: PartialDownload | null, 
/**
 * Fit on this machine.
 */
fit: Fit, };

/**
 * What the user asked for.
 */
export type ChatAction = { "kind": "send", 
/**
 * Its text.
 */
content: string, 
/**
 * The pictures given with it (checked again here: `crate::pictures`), in order.
 */
pictures: Array<PictureUpload>, } | { "kind": "regenerate" } | { "kind": "edit", 
/**
 * The user message to replace.
 */
message_id: number, 
/**
 * Its new text.
 */
content: string, } | { "kind": "continue", 
/**
 * The answer to write on.
 */
message_id: number, };

/**
 * Events of an answer, in order: `Started`, then `Token`s and `Stats`, then `Done` or
 * `Error` (a `Fallback` may come before `Started` or in the middle).
 */
export type ChatEvent = { "event": "started", "data": { 
/**
 * The conversation's line of the list now (a first message names it; it is the most
 * recently changed), so the front end need not list the conversations again.
 */
conversation: ConversationSummary, 
/**
 * The saved user message (None when regenerating).
 */
user_message: Message | null, 
/**
 * The (empty) answer being written.
 */
assistant_message: Message, 
/**
 * Tokens of the prompt after trimming.
 */
prompt_tokens: number, 
/**
 * The model's context length.
 */
context_limit: number, 
/**
 * Oldest messages left out.
 */
trimmed_messages: number, 
/**
 * The model answering.
 */
model: ModelStatus, } } | { "event": "sources", "data": { 
/**
 * The sources, saved with the answer.
 */
sources: Array<Source>, } } | { "event": "reading", "data": PrefillProgress } | { "event": "token", "data": { 
/**
 * Text to append.
 */
text: string, } } | { "event": "stats", "data": LiveStats } | { "event": "done", "data": { 
/**
 * The stored answer.
 */
message: Message, } } | { "event": "fallback", "data": { 
/**
 * What happened, in plain words.
 */
reason: string, 
/**
 * Where answers run now.
 */
backend: BackendKind, 
/**
 * The model as it runs now.
 */
model: ModelStatus, } } | { "event": "error", "data": { 
/**
 * Error code.
 */
code: ErrorCode, 
/**
 * What happened.
 */
message: string, } };

/**
 * What a check looks at.
 */
export type CheckId = "device" | "kernel" | "firmware" | "access" | "memlock" | "xrt" | "fastflowlm" | "flm_validate" | "sensors" | "contexts";

/**
 * How a check came out.
 */
export type CheckStatus = "ok" | "info" | "warning" | "problem";

/**
 * An error with its code and a plain message.
 */
export type CommandError = { 
/**
 * Stable, machine-readable kind.
 */
code: ErrorCode, 
/**
 * What happened and what the user can do, in plain words (English).
 */
message: string, 
/**
 * Which message of `code`, when it names a thing: the UI's catalog key is
 * `error.<code>.<detail>`, filled with `params`. None: the code's own message.
 */
detail: string | null, 
/**
 * The things the message names (a model, a repository, sizes), by parameter name.
 */
params: { [key in string]: string }, };

/**
 * A conversation with its messages.
 */
export type Conversation = { 
/**
 * Id (hex).
 */
id: string, 
/**
 * Title shown in the list.
 */
title: string, 
/**
 * Unix seconds.
 */
created_at: number, 
/**
 * Unix seconds of the last change.
 */
updated_at: number, 
/**
 * System prompt and sampling.
 */
settings: ConversationSettings, 
/**
 * Messages, oldest first.
 */
messages: Array<Message>, 
/**
 * Earlier versions of its answers, oldest first (none in conversations saved before
 * versions were kept).
 */
versions: Array<AnswerVersion>, };

/**
 * A conversation's files as the front end shows them above the message box.
 */
export type ConversationDocuments = { 
/**
 * The attached files, then those still being indexed for it.
 */
documents: Array<DocumentInfo>, 
/**
 * What to tell the user before the first answer when the model in use is on a remote
 * server and they have not accepted that passages go there (None: nothing to tell).
 */
remote_notice: RemoteNotice | null, };

/**
 * The settings a conversation carries with it.
 */
export type ConversationSettings = { 
/**
 * Instructions given to the model before the conversation. Empty: none.
 */
system_prompt: string, 
/**
 * Sampling for this conversation's answers.
 */
sampling: Sampling, 
/**
 * Longest answer, in tokens.
 */
max_tokens: number, 
/**
 * Ask reasoning models to think first (None: the model's default).
 */
enable_thinking: boolean | null, };

/**
 * A line of the conversation list.
 */
export type ConversationSummary = { 
/**
 * Id.
 */
id: string, 
/**
 * Title.
 */
title: string, 
/**
 * Unix seconds.
 */
created_at: number, 
/**
 * Unix seconds.
 */
updated_at: number, 
/**
 * Number of messages.
 */
message_count: number, 
/**
 * Text around the search match (when searching).
 */
snippet: string | null, };

/**
 * A bound that stopped the walk before the whole folder was seen.
 */
export type CutWhy = "files" | "depth" | "bytes" | "entries";

/**
 * What the system shows of an NPU.
 */
export type Detection = { "state": "found" } & NpuDevice | { "state": "no_driver", 
/**
 * PCI address, `0000:c5:00.1`.
 */
pci_address: string, 
/**
 * The generation.
 */
generation: NpuGeneration, } | { "state": "not_found" };

/**
 * How the indexing of the user's files goes, sent to the front end (a drop on the window is
 * sent on its own event, as a `Dropped`).
 */
export type DocumentEvent = { "event": "progress", "data": IndexProgress } | { "event": "indexed", "data": { 
/**
 * The file as the library has it now.
 */
document: DocumentInfo, } } | { "event": "failed", "data": { 
/**
 * The file's name.
 */
name: string, 
/**
 * Why, by code, with the technical detail apart.
 */
error: FileError, 
/**
 * Names this failure for Keep in Your files (None: nothing to keep, e.g. the run
 * itself failed).
 */
failure: number | null, } } | { "event": "finished", "data": { 
/**
 * Whether Cancel stopped it early (what it did not reach waits for the next run).
 */
cancelled: boolean, 
/**
 * Files it was given that it never read (only when cancelled), by name: attach them
 * again to read them.
 */
unread: Array<string>, } };

/**
 * A file in the library or attached to a conversation, as the front end shows it.
 */
export type DocumentInfo = { 
/**
 * Its id in the library (0 while its first indexing has not stored it yet).
 */
id: number, 
/**
 * The file's name, without its folder.
 */
name: string, 
/**
 * What kind of file: "pdf", "docx", "text", ...
 */
format: string, 
/**
 * Its title, when the file names one.
 */
title: string | null, 
/**
 * Bytes of the original file.
 */
size: number, 
/**
 * Passages indexed (0 while indexing, or when it could not be read).
 */
passages: number, 
/**
 * Of those, passages with no vector from the embedding model yet (a cancel, or another
 * model chosen): found by keyword only until indexing continues.
 */
waiting: number, 
/**
 * Why it could not be read (kept in the library only when the user asked).
 */
error: FileError | null, 
/**
 * Whether it is being indexed now.
 */
indexing: boolean, };

/**
 * A picture checked and ready to go with the next message.
 */
export type DraftPicture = { 
/**
 * The file's name (or what the front end called a pasted picture).
 */
name: string, 
/**
 * `image/png` or `image/jpeg` (what it was re-encoded to).
 */
media_type: string, 
/**
 * Width in pixels, after downscaling.
 */
width: number, 
/**
 * Height in pixels, after downscaling.
 */
height: number, 
/**
 * Its size in bytes, re-encoded.
 */
size: number, 
/**
 * The re-encoded picture, base64: shown as the thumbnail, sent back with the message.
 */
data: string, 
/**
 * What it costs of the context, estimated ([`picture::tokens_for`]).
 */
tokens: number, };

/**
 * What a drop is, as a whole.
 */
export type DropKind = "model" | "documents" | "neither";

/**
 * A drop as the front end sees it.
 */
export type Dropped = { 
/**
 * What the drop is.
 */
kind: DropKind, 
/**
 * The names of what is acted on (the model; the documents and the folders they came
 * from), without their folders.
 */
names: Array<string>, 
/**
 * What the drop also held that is not acted on, and why.
 */
left: Array<LeftFile>, 
/**
 * Each folder of documents: the files it gave, and those skipped and why.
 */
folders: Array<FolderReport>, 
/**
 * What is done and what is not, in plain words (English; the desktop says it from its
 * catalog, by `kind`, `names`, `left` and `folders`).
 */
reason: string, 
/**
 * Names the model or the documents for the one action taken on them (single-use); None
 * when nothing is usable.
 */
token: string | null, };

/**
 * What one answer cost. The headline fields come from the best meter available (package, then
 * battery, then NPU); `meters` has each meter apart. Deserializes too, so it can be stored with
 * an answer.
 */
export type EnergyReport = { 
/**
 * Seconds of prefill.
 */
prefill_secs: number, 
/**
 * Seconds of decode.
 */
decode_secs: number, 
/**
 * Tokens of prompt read.
 */
prompt_tokens: number, 
/**
 * Tokens generated.
 */
generated_tokens: number, 
/**
 * The headline meter, `None` when no power reading was available.
 */
meter: Meter | null, 
/**
 * "package power: amdgpu hwmon4 power1_average (PPT)", or "unavailable: <reasons>".
 */
source: string, 
/**
 * Headline joules while reading the prompt.
 */
prefill_joules: number | null, 
/**
 * Headline joules while generating.
 */
decode_joules: number | null, 
/**
 * Headline joules for the whole answer.
 */
total_joules: number | null, 
/**
 * Headline joules per 1000 generated tokens (the whole answer's energy, prompt included,
 * divided by the tokens it produced).
 */
joules_per_1000_tokens: number | null, 
/**
 * Every meter that had readings.
 */
meters: Array<MeterEnergy>, 
/**
 * Battery use per hour of generating, when on battery and the capacity is known.
 */
battery: BatteryUse | null, 
/**
 * Number of power samples taken.
 */
samples: number, };

/**
 * What kind of failure, for a front end to act on (the UI shows some apart, e.g. `disk_full`).
 */
export type ErrorCode = "busy" | "not_found" | "invalid_input" | "model" | "no_model" | "context" | "storage" | "internal" | "unsupported" | "npu" | "offline" | "network" | "access_denied" | "disk_full" | "corrupt" | "invalid_model" | "connection" | "timeout" | "auth" | "model_not_found" | "cut" | "bad_reply" | "wrong_model" | "not_ready" | "server";

/**
 * Export file format.
 */
export type ExportFormat = "markdown" | "json";

/**
 * Why a file could not be read, as the front end says it: a stable `code` it translates
 * (filling in `params`), and the technical `detail` (the parser's words, the path) that it
 * shows only under Details. `message` is the whole English sentence (the command line's, and
 * the words for a code a front end does not know).
 */
export type FileError = { 
/**
 * What went wrong: "damaged", "password", "too-large", "unknown-kind", …
 */
code: string, 
/**
 * The values the sentence names (file name, sizes, limits, format, languages).
 */
params: { [key in string]: string }, 
/**
 * The technical detail, for Details (None: the sentence says all).
 */
detail: string | null, 
/**
 * The English sentence.
 */
message: string, };

/**
 * Size and checksum of one installed file.
 */
export type FileRecord = { 
/**
 * Bytes.
 */
size: number, 
/**
 * Lowercase hex sha256 of the content.
 */
sha256: string, };

/**
 * NPU firmware version `major.minor.patch.build`.
 */
export type FirmwareVersion = [number, number, number, number];

/**
 * Whether a model fits, and a sentence saying so.
 */
export type Fit = { 
/**
 * The model's memory need is below the installed memory (with 2 GB left for the rest).
 */
memory: boolean, 
/**
 * The download fits in the free disk space.
 */
disk: boolean, 
/**
 * Plain-language hint.
 */
hint: string, };

/**
 * What was found of FastFlowLM.
 */
export type FlmInfo = { 
/**
 * Path of the executable (`flm` or the open-kernel fork `oflm`), if found.
 */
executable: string | null, 
/**
 * Its version ("0.9.43"), if it could be read.
 */
version: string | null, 
/**
 * Why the version is unknown, when it is.
 */
version_error: string | null, };

/**
 * A bound that stopped the walk, with its value (files, folders, bytes or entries).
 */
export type FolderCut = { why: CutWhy, limit: number, };

/**
 * What was taken of one folder, as the front end says it: "Tax papers: 12 files attached;
 * 3 skipped: 2 are not documents Hearth reads, 1 is too large".
 */
export type FolderReport = { 
/**
 * The folder's name, without its parent.
 */
name: string, 
/**
 * Files taken to attach.
 */
files: number, 
/**
 * The files and folders left, counted by why (each reason once, in [`Skip`]'s order).
 */
skipped: Array<SkipCount>, 
/**
 * The bounds that stopped the walk early (none: the whole folder was seen).
 */
cuts: Array<FolderCut>, };

/**
 * How a found model's weights are stored.
 */
export type FoundFormat = "gguf" | "safetensors";

/**
 * A model found on this computer.
 */
export type FoundModel = { 
/**
 * The name its program shows (`llama3.2:1b` for Ollama).
 */
name: string, 
/**
 * A name Hearth can register it under (letters, digits, `.`, `-`, `_`).
 */
import_name: string, 
/**
 * The GGUF file, or the safetensors folder: what `hearth import` takes.
 */
path: string, 
/**
 * Whose folder it is in.
 */
source: FoundSource, 
/**
 * Bytes of its weights (and, for a folder, its other files).
 */
size_bytes: number, 
/**
 * GGUF `general.architecture`, or config.json `architectures[0]` / `model_type`.
 */
architecture: string | null, 
/**
 * GGUF or safetensors.
 */
format: FoundFormat, 
/**
 * Whether Hearth's import accepts it.
 */
runnable: boolean, 
/**
 * Why not, in plain words, when it does not.
 */
reason: string | null, };

/**
 * The program whose folder a model was found in.
 */
export type FoundSource = "ollama" | "lmstudio" | "jan" | "huggingface";

/**
 * A process that has the NPU open.
 */
export type Holder = { 
/**
 * Process id.
 */
pid: number, 
/**
 * `/proc/<pid>/comm`, e.g. `flm`.
 */
name: string, 
/**
 * `/proc/<pid>/cmdline` with spaces, when readable.
 */
command: string | null, };

/**
 * How far the indexing of files is.
 */
export type IndexProgress = { 
/**
 * The file being read, or whose passages are embedded.
 */
document_name: string, 
/**
 * Which of the two stages.
 */
stage: IndexStage, 
/**
 * Files read (reading) or passages embedded (embedding) so far.
 */
done: number, 
/**
 * In all.
 */
total: number, 
/**
 * While the file's scanned pages are read by OCR: pages read so far, and of how many.
 */
scanned_pages: ScannedPages | null, };

/**
 * The two stages of indexing: every file is read (then searchable by keyword), then its
 * passages are embedded (then searchable by meaning).
 */
export type IndexStage = "reading" | "embedding";

/**
 * A model as `hearth list` and the app show it.
 */
export type InstalledModel = { 
/**
 * Folder name, what users type.
 */
name: string, 
/**
 * FastFlowLM tag `family:size` (empty for the built-in model).
 */
tag: string, 
/**
 * The model folder.
 */
folder: string, 
/**
 * Bytes on disk.
 */
size_bytes: number, 
/**
 * Where it came from: `huggingface:owner/name@commit`, `import:<folder>`, `link:<file>`
 * (a GGUF file read where it lies), `built-in`.
 */
source: string, 
/**
 * `owner/name` on the Hub, for downloads.
 */
repo: string | null, 
/**
 * Commit, for downloads.
 */
revision: string | null, 
/**
 * Catalog id, when it came from the catalog.
 */
catalog_id: string | null, 
/**
 * Weight format.
 */
format: WeightFormat, 
/**
 * Where it runs.
 */
backends: Array<Backend>, 
/**
 * Whether it is the default model.
 */
is_default: boolean, 
/**
 * Whether it ships with Hearth (cannot be removed).
 */
builtin: boolean, 
/**
 * Size and sha256 of every file (empty for the built-in model and foreign entries).
 */
files: { [key in string]: FileRecord }, 
/**
 * For a GGUF file read where it lies (linked, not copied): the file and whether it is
 * still there and the same. None for a model whose files are in Hearth's folder.
 */
linked: LinkStatus | null, 
/**
 * Whether FastFlowLM reads pictures with it on the NPU: the registry's `vlm` mark, read
 * whether or not FastFlowLM is installed. Hearth's CPU engine reads text only.
 */
sees_pictures: boolean, };

/**
 * The running kernel, from `/proc/sys/kernel/osrelease`.
 */
export type Kernel = { 
/**
 * "6.14.0-15-generic".
 */
release: string, 
/**
 * (major, minor), when the release starts with them.
 */
version: [number, number] | null, };

/**
 * The language of the app's words: the system's, or one Hearth ships.
 */
export type Language = "system" | "en" | "zh" | "es" | "de" | "fr";

/**
 * A dropped file or folder that is not acted on, and why.
 */
export type LeftFile = { 
/**
 * Its name, without its folder.
 */
name: string, 
/**
 * Why it is left.
 */
why: LeftOut, };

/**
 * Why a dropped file or folder is not acted on.
 */
export type LeftOut = "model_with_documents" | "another_model" | "folder" | "unknown";

/**
 * The library as the front end shows it.
 */
export type LibraryView = { 
/**
 * Every file indexed.
 */
documents: Array<DocumentInfo>, 
/**
 * Bytes the library's database takes on disk.
 */
disk_bytes: number, 
/**
 * The model that finds passages by meaning: an installed model's name, or the bundled
 * all-MiniLM-L6-v2's (None: none could be loaded, so files are found by keyword only).
 */
embedding_model: string | null, 
/**
 * Installed embedding models the user may choose instead of the bundled one, by name.
 */
embedding_choices: Array<string>, 
/**
 * Passages that have no vector from that model yet: found by keyword only until indexing
 * continues (`Documents::continue_indexing`).
 */
waiting: number, 
/**
 * Whether files are being indexed now.
 */
indexing: boolean, 
/**
 * The languages scans can be read in here (Tesseract's installed language data), for
 * Settings › Files; None: Tesseract is not installed, so scans are not read.
 */
scan_languages: Array<ScanLanguage> | null, 
/**
 * The second look at passages (Settings › Files): the setting, the model, its measured
 * cost here.
 */
rerank?: RerankStatus, };

/**
 * Whether a linked model's GGUF file is still the one it was added from, as far as a stat can
 * tell (the header hash is checked when the engine opens it).
 */
export type LinkState = "ready" | "missing" | "changed";

/**
 * A linked model's GGUF file and whether it can be read, as the model list shows it.
 */
export type LinkStatus = { 
/**
 * Where the file was when it was added.
 */
file: string, 
/**
 * Whether it is still there and the same.
 */
state: LinkState, };

/**
 * What listening started on.
 */
export type Listening = { 
/**
 * The microphone's name.
 */
device: string, 
/**
 * The longest recording, in seconds.
 */
max_seconds: number, };

/**
 * Live numbers while an answer is written.
 */
export type LiveStats = { 
/**
 * Answer pieces so far (about one per token).
 */
generated_tokens: number, 
/**
 * Seconds to the first piece, once it came.
 */
ttft_secs: number | null, 
/**
 * Speed since the first piece.
 */
tokens_per_second: number | null, 
/**
 * Seconds since the request.
 */
elapsed_secs: number, };

/**
 * Where loading a model onto the NPU has got to.
 */
export type LoadingStage = "starting" | "loading" | "checking" | "ready" | "failed" | "stopped";

/**
 * A model Hearth can open.
 */
export type LocalModel = { 
/**
 * Its name in the registry.
 */
name: string, 
/**
 * Its folder.
 */
path: string, 
/**
 * Which model came with Hearth, when this is it (None for a model the user installed).
 */
builtin: BuiltinKind | null, 
/**
 * The model Hearth opens at start.
 */
is_default: boolean, 
/**
 * Where it can run on this computer: Hearth's engine on the processor (every local
 * model; unusable only for a linked GGUF file that was moved, changed or deleted, with
 * the plain words of [`LocalModel::unavailable`]), then the NPU through FastFlowLM,
 * usable or with the reason why not, and seeing pictures where the registry's `vlm` says.
 */
backends: Array<Availability>, 
/**
 * How the NPU's answers compared with the processor's, once the self-test has run.
 */
selftest: SelfTest | null, };

/**
 * Memory and disk of this machine.
 */
export type Machine = { 
/**
 * Installed memory in bytes.
 */
total_memory: number, 
/**
 * Memory available now in bytes.
 */
available_memory: number, 
/**
 * Free disk space where models are stored, in bytes.
 */
free_disk: number, };

/**
 * A memlock limit.
 */
export type Memlock = "unlimited" | { "bytes": number };

/**
 * The soft and hard memlock limits of this process.
 */
export type MemlockLimits = { 
/**
 * The limit in force.
 */
soft: Memlock, 
/**
 * The most the process may raise it to without privileges.
 */
hard: Memlock, };

/**
 * One message.
 */
export type Message = { 
/**
 * Database id (increasing in conversation order).
 */
id: number, 
/**
 * Who wrote it.
 */
role: Role, 
/**
 * Its text.
 */
content: string, 
/**
 * Its state.
 */
state: MessageState, 
/**
 * How it was made (answers only).
 */
receipt: Receipt | null, 
/**
 * Unix seconds.
 */
created_at: number, 
/**
 * The versions of this message that edits made, oldest first, this one among them: each
 * keeps the conversation that followed it (see [`ConversationStore::show_branch`]). Empty
 * for a message never edited.
 */
branches: Array<number>, 
/**
 * The pictures given with it (user messages), in order; their bytes are read with
 * [`ConversationStore::picture`]. Empty for most messages.
 */
pictures: Array<PictureInfo>, };

/**
 * The sources of one saved answer.
 */
export type MessageSources = { 
/**
 * The answer.
 */
message_id: number, 
/**
 * Its sources, by number.
 */
sources: Array<Source>, };

/**
 * Where a message is in its life.
 */
export type MessageState = "complete" | "streaming" | "stopped" | "interrupted" | "error";

/**
 * Which power the joules integrate.
 */
export type Meter = "package" | "battery" | "npu";

/**
 * Energy by one meter.
 */
export type MeterEnergy = { 
/**
 * The meter.
 */
meter: Meter, 
/**
 * Where its readings came from (all distinct sources seen, joined).
 */
source: string, 
/**
 * Joules while reading the prompt.
 */
prefill_joules: number, 
/**
 * Joules while generating.
 */
decode_joules: number, 
/**
 * Prefill + decode.
 */
total_joules: number, 
/**
 * Mean power over the generation, W.
 */
average_watts: number, 
/**
 * Readings that had a value.
 */
readings: number, };

/**
 * A reading with its source, or the reason it is unavailable: never a silent zero.
 *
 * JSON: `{"value": 4.2, "source": "amdgpu gpu_metrics (card1) average_ipu_power"}` or
 * `{"unavailable": "no amdgpu gpu_metrics file"}`.
 */
export type Metric<T> = { 
/**
 * The value, in the unit the field's name or doc states.
 */
value: T, 
/**
 * Where the value was read: file or interface and field.
 */
source: string, } | { 
/**
 * Why there is no value.
 */
unavailable: string, };

/**
 * What a model is for.
 */
export type ModelKind = "chat" | "embedding" | "speech" | "reranking";

/**
 * What a front end shows while a model loads onto the NPU.
 */
export type ModelLoading = { 
/**
 * The model's name.
 */
model: string, 
/**
 * Where it is being loaded.
 */
backend: BackendKind, 
/**
 * How far it got.
 */
stage: LoadingStage, 
/**
 * In plain words.
 */
message: string, };

/**
 * What a front end shows about the model in use.
 */
export type ModelStatus = { 
/**
 * Its name in the registry (a remote model: the server's id for it).
 */
name: string, 
/**
 * Folder (empty for a remote model).
 */
path: string, 
/**
 * Architecture family ("remote" for a model on a server).
 */
family: string, 
/**
 * Number of parameters (0 when unknown: a remote model, a model on the NPU).
 */
parameter_count: number, 
/**
 * Context length it was loaded with, in tokens (0: unknown, a server that does not say).
 */
context_length: number, 
/**
 * "q4nx" or "safetensors" ("" for a remote model).
 */
weight_format: string, 
/**
 * Where it runs.
 */
backend_kind: BackendKind, 
/**
 * The backend with detail, e.g. "cpu (avx2)".
 */
backend: string, 
/**
 * The device it runs on.
 */
device: string, 
/**
 * Kernel level in use (e.g. avx2; "" for a remote model).
 */
kernel: string, 
/**
 * Which model came with Hearth, when this is it.
 */
builtin: BuiltinKind | null, 
/**
 * sha256 of the weights file, when known.
 */
sha256: string | null, 
/**
 * Whether it reads pictures given with a message (`Backend::sees_pictures`).
 */
sees_pictures: boolean, };

/**
 * Everything the Models view shows.
 */
export type ModelsOverview = { 
/**
 * Memory and free disk of this machine.
 */
machine: Machine, 
/**
 * The catalog with install state and fit hints.
 */
catalog: Array<CatalogItem>, 
/**
 * Installed models (the bundled demo first).
 */
installed: Array<InstalledModel>, 
/**
 * Paused or interrupted downloads.
 */
partial: Array<PartialDownload>, 
/**
 * Names of the downloads running now.
 */
downloading: Array<string>, 
/**
 * Whether a GGUF file added now is copied into Hearth's folder instead of linked where it
 * lies ([`App::copy_models`]), so the Models view says which it does.
 */
copy_models: boolean, };

/**
 * A message shown to the user once.
 */
export type Notice = { 
/**
 * Importance.
 */
level: NoticeLevel, 
/**
 * Plain words (English).
 */
message: string, 
/**
 * Which notice: the desktop's catalog key is `notice.<code>`, filled with `params`.
 */
code: string, 
/**
 * What the notice names (a file, a reason), by parameter name.
 */
params: { [key in string]: string }, };

/**
 * How important a notice is.
 */
export type NoticeLevel = "info" | "warning" | "error";

/**
 * One finding, in plain words (English), and as a code with parameters for a front end that
 * shows it in another language.
 */
export type NpuCheck = { 
/**
 * What was checked.
 */
id: CheckId, 
/**
 * How it came out.
 */
status: CheckStatus, 
/**
 * Which finding: the desktop's catalog key is `npu.check.<code>`, filled with `params`.
 */
code: string, 
/**
 * What the finding and its fix name (versions, paths, a group, processes), by name.
 */
params: { [key in string]: string }, 
/**
 * One sentence: what is the case.
 */
summary: string, 
/**
 * Which fix: the catalog key is `npu.fix.<fix_code>`, filled with `params`.
 */
fix_code: string | null, 
/**
 * What to do about it, step by step, with exact commands; `None` when nothing is needed.
 */
fix: string | null, };

/**
 * An NPU with a driver bound and an accel entry.
 */
export type NpuDevice = { 
/**
 * `accel0`.
 */
accel: string, 
/**
 * `/dev/accel/accel0`.
 */
node: string, 
/**
 * PCI address from the `device` link, `0000:c5:00.1`.
 */
pci_address: string | null, 
/**
 * PCI device id.
 */
pci_device: number, 
/**
 * The generation.
 */
generation: NpuGeneration, 
/**
 * `vbnv`: "NPU Strix", "NPU Strix Halo", "NPU Krackan 1"...
 */
product: string | null, 
/**
 * `fw_version` as written.
 */
firmware_text: string | null, 
/**
 * `fw_version` parsed.
 */
firmware: FirmwareVersion | null, 
/**
 * The driver the `driver` link names (`amdxdna`).
 */
driver: string | null, };

/**
 * Everything the doctor found.
 */
export type NpuDiagnosis = { 
/**
 * True when no check is a [`Status::Problem`]: the NPU path can run.
 */
ready: boolean, 
/**
 * One line for a status bar: "NPU ready: NPU Strix (XDNA 2)" or what blocks it.
 */
summary: string, 
/**
 * What the system shows of the NPU.
 */
detection: Detection, 
/**
 * The running kernel.
 */
kernel: Kernel | null, 
/**
 * The memlock limits of this process.
 */
memlock: MemlockLimits | null, 
/**
 * XRT as found.
 */
xrt: XrtInfo, 
/**
 * FastFlowLM as found.
 */
fastflowlm: FlmInfo, 
/**
 * Processes holding the device.
 */
holders: Array<Holder>, 
/**
 * The driver's sensors, read once through the ioctl when the device opened.
 */
sensors: Metric<Array<Sensor>>, 
/**
 * The findings, in order.
 */
checks: Array<NpuCheck>, };

/**
 * Which NPU generation a PCI device id is.
 */
export type NpuGeneration = "xdna2" | "xdna1";

/**
 * How a file was opened.
 */
export type Opened = { 
/**
 * The file's name (no folder).
 */
name: string, 
/**
 * Whether the program was asked to show the page (false: it opens at its own first page).
 */
at_page: boolean, };

/**
 * A download that was paused or interrupted and can be resumed.
 */
export type PartialDownload = { 
/**
 * Model name.
 */
name: string, 
/**
 * `owner/name`.
 */
repo: string, 
/**
 * What the user asked for (catalog id or repo), to resume with.
 */
query: string, 
/**
 * Bytes already on disk.
 */
done_bytes: number, 
/**
 * Bytes of the whole model.
 */
total_bytes: number, };

/**
 * What a saved message says of one of its pictures (the bytes are read with
 * [`ConversationStore::picture`]).
 */
export type PictureInfo = { 
/**
 * Its place among the message's pictures, from 0.
 */
index: number, 
/**
 * `image/png` or `image/jpeg`.
 */
media_type: string, 
/**
 * Width in pixels.
 */
width: number, 
/**
 * Height in pixels.
 */
height: number, 
/**
 * Size of the encoded picture in bytes.
 */
size: number, };

/**
 * The bounds on the pictures of one message, as a front end shows and checks them first (the
 * desktop reads them in the app's status; the app checks them again all the same).
 */
export type PictureLimits = { 
/**
 * The most pictures one message carries ([`MAX_PICTURES`]).
 */
max_pictures: number, 
/**
 * The largest picture file, in bytes ([`MAX_PICTURE_BYTES`]).
 */
max_picture_bytes: number, };

/**
 * A picture as a front end sends it with a message: its name and its bytes, base64.
 */
export type PictureUpload = { 
/**
 * Its name, for errors.
 */
name: string, 
/**
 * The picture's bytes, base64.
 */
data: string, };

/**
 * Whether Piper can speak here, and the voice offered for each language.
 */
export type PiperStatus = { 
/**
 * A `piper` program is installed (without it espeak-ng speaks, and voices are not offered).
 */
piper_installed: boolean, 
/**
 * One voice per language Hearth speaks.
 */
voices: Array<PiperVoiceRow>, };

/**
 * The voice offered for one language.
 */
export type PiperVoiceRow = { 
/**
 * The language it speaks.
 */
language: Language, 
/**
 * Its name (`en_US-lessac-medium`).
 */
name: string, 
/**
 * About how many bytes it takes.
 */
about_bytes: number, 
/**
 * It is downloaded.
 */
installed: boolean, 
/**
 * It is being downloaded now.
 */
downloading: boolean, };

/**
 * Power and utilization at one moment. Every field is a value with its source, or the reason
 * it is missing.
 */
export type PowerSample = { 
/**
 * Seconds since telemetry started (0 for a one-off reading).
 */
t_secs: number, 
/**
 * NPU power, W.
 */
npu_watts: Metric<number>, 
/**
 * NPU busy, % (mean over its columns).
 */
npu_percent: Metric<number>, 
/**
 * Whole-package power (CPU + iGPU + NPU + SoC), W.
 */
package_watts: Metric<number>, 
/**
 * The laptop's draw from its battery, W, while discharging.
 */
battery_watts: Metric<number>, 
/**
 * CPU busy since the previous reading, %.
 */
cpu_percent: Metric<number>, 
/**
 * iGPU busy, %.
 */
igpu_percent: Metric<number>, };

/**
 * How far a turn's prompt has been read: `done` of the `total` tokens this turn runs through
 * the model (the part not already in the cache; a reused prefix counts in neither). Reported
 * at 0 before the first chunk and after each chunk the prefill runs.
 */
export type PrefillProgress = { 
/**
 * Tokens read so far.
 */
done: number, 
/**
 * Tokens to read.
 */
total: number, };

/**
 * How a download ended.
 */
export type PullEnd = "installed" | "already_installed" | "paused" | "cancelled";

/**
 * The step a pull is at.
 */
export type PullPhase = "resolving" | "downloading" | "retrying" | "validating" | "converting" | "registering" | "done" | "paused" | "cancelled";

/**
 * A snapshot of a pull, sent to the progress callback (and over IPC to the app).
 */
export type PullProgress = { 
/**
 * Model name (folder name).
 */
name: string, 
/**
 * Current step.
 */
phase: PullPhase, 
/**
 * File being downloaded, if any.
 */
file: string | null, 
/**
 * Files fully downloaded so far.
 */
files_done: number, 
/**
 * Files in the model.
 */
file_count: number, 
/**
 * Bytes on disk so far, over all files (resumed bytes included).
 */
done_bytes: number, 
/**
 * Bytes of all files.
 */
total_bytes: number, 
/**
 * Recent speed in bytes per second (0 until known).
 */
bytes_per_sec: number, 
/**
 * Seconds left at the recent speed, if known.
 */
eta_secs: number | null, 
/**
 * A plain-language note ("connection dropped, resuming at 1.2 GB").
 */
message: string | null, };

/**
 * How a [`App::pull_model`] call ended.
 */
export type PullResult = { 
/**
 * How it ended.
 */
outcome: PullEnd, 
/**
 * The model, when installed.
 */
model: InstalledModel | null, };

/**
 * What a reading did.
 */
export type ReadAloudEvent = { "kind": "started", 
/**
 * The answer read, when it is one.
 */
message_id: number | null, } | { "kind": "ended", 
/**
 * The answer read, when it is one.
 */
message_id: number | null, 
/**
 * It was stopped before its end.
 */
stopped: boolean, } | { "kind": "failed", 
/**
 * The answer read, when it is one.
 */
message_id: number | null, 
/**
 * Why, in plain words.
 */
error: CommandError, };

/**
 * How an answer was made: stored with it, shown under it, printed by `hearth run --json`.
 */
export type Receipt = { 
/**
 * The model's name.
 */
model_name: string, 
/**
 * sha256 of the weights file, when known.
 */
model_sha256: string | null, 
/**
 * Where it ran. Absent in receipts saved before backends existed: those ran on the CPU.
 */
backend_kind: BackendKind, 
/**
 * The backend with detail ("cpu (avx2)", "remote (http://...)").
 */
backend: string, 
/**
 * The device (CPU model name, NPU, server address).
 */
device: string, 
/**
 * Version of the program that ran the model, when not Hearth (FastFlowLM's).
 */
runtime_version: string | null, 
/**
 * Tokens the model read (after trimming).
 */
prompt_tokens: number, 
/**
 * Tokens it wrote.
 */
generated_tokens: number, 
/**
 * False when the token counts are estimates (a server that reported none).
 */
counts_exact: boolean, 
/**
 * Seconds from the request to the first answer text (wall clock, measured by Hearth).
 */
ttft_secs: number, 
/**
 * Seconds from the first answer text to the last (wall clock).
 */
decode_secs: number, 
/**
 * Decode speed (tokens after the first over `decode_secs`).
 */
tokens_per_second: number, 
/**
 * The backend's own timing fields, when it reports them.
 */
backend_timings: BackendTimings | null, 
/**
 * "end of turn", "length limit", "stopped", "context full", "stop string".
 */
stop_reason: string, 
/**
 * Oldest messages left out to fit the context.
 */
trimmed_messages: number, 
/**
 * Unix seconds.
 */
finished_at: number, 
/**
 * Energy of the answer, when power could be read.
 */
energy: EnergyReport | null, };

/**
 * A model the remote server offers, as the settings and the model picker show it.
 */
export type RemoteModel = { 
/**
 * Its id on the server.
 */
name: string, 
/**
 * Whether the server itself says it sees pictures (Ollama's capabilities): the user's
 * switch adds to this and cannot take it away.
 */
server_sees: boolean, 
/**
 * Where it runs: on the remote server, with whether it sees pictures (the server's word
 * or the user's mark), as for the models on this computer.
 */
backend: Availability, };

/**
 * The notice that passages of the attached files will be sent to a remote server.
 */
export type RemoteNotice = { 
/**
 * The server the passages would go to.
 */
server: string, 
/**
 * The notice in English; the desktop says it from its catalog, naming `server`.
 */
message: string, };

/**
 * The saved remote server as a front end sees it: never the key itself.
 */
export type RemoteServer = { 
/**
 * `http://host:port` (or https).
 */
url: string, 
/**
 * `host:port`, to name the server in plain sentences.
 */
host: string, 
/**
 * The model last chosen on it.
 */
model: string | null, 
/**
 * Whether a key is saved.
 */
has_key: boolean, 
/**
 * The models the user switched to "sees pictures" (adding to what the server says).
 */
sees_pictures: Array<string>, };

/**
 * What `remove` freed.
 */
export type Removed = { 
/**
 * Model name.
 */
name: string, 
/**
 * Bytes freed on disk.
 */
freed_bytes: number, };

/**
 * Whether the passages found for a question get a second look by a language model
 * (`crate::documents::rerank`): slower, finds more.
 */
export type RerankMode = "auto" | "on" | "off";

/**
 * What Settings › Files shows of the second look.
 */
export type RerankStatus = { 
/**
 * The setting.
 */
mode: RerankMode, 
/**
 * The model that judges (an installed reranker, or the chat model last asked); None
 * while none is known.
 */
model: string | null, 
/**
 * Its measured milliseconds per question here; None until a question measured it.
 */
millis: number | null, 
/**
 * Whether the next question is judged: on, or auto unmeasured (its first question
 * measures) or measured under the limit; never without a model.
 */
active: boolean, };

/**
 * Who wrote a message.
 */
export type Role = "user" | "assistant";

/**
 * How the next token is chosen.
 */
export type Sampling = { 
/**
 * Softmax temperature; 0 picks the most likely token (greedy). By default, 0.7.
 */
temperature: number, 
/**
 * Keep only the `top_k` most likely tokens; 0 keeps all. By default, 40.
 */
top_k: number, 
/**
 * Keep the smallest set of tokens whose probability reaches `top_p`; 1 keeps all.
 * By default, 0.95.
 */
top_p: number, 
/**
 * Drop tokens less likely than `min_p` times the most likely one; 0 keeps all.
 * By default, 0.05.
 */
min_p: number, 
/**
 * Divide positive (multiply negative) logits of the tokens among the last
 * [`REPETITION_WINDOW`] of the context by this; 1 disables it. By default, 1.0.
 */
repetition_penalty: number, 
/**
 * Seed of the random source. By default, 0.
 */
seed: number, };

/**
 * A language scans can be read in: Tesseract's name for it and what its data takes on disk.
 */
export type ScanLanguage = { 
/**
 * Tesseract's name: "eng", "deu", "chi_sim"…
 */
code: string, 
/**
 * Bytes of its data file.
 */
bytes: number, };

/**
 * How far the OCR of a file's scanned pages is.
 */
export type ScannedPages = { done: number, total: number, };

/**
 * What the Models view shows about a model's self-test.
 */
export type SelfTest = { 
/**
 * Prompts whose NPU and CPU answers are identical.
 */
identical: number, 
/**
 * Prompts compared.
 */
total: number, 
/**
 * One plain sentence.
 */
summary: string, };

/**
 * One decoded sensor record.
 */
export type Sensor = { 
/**
 * `label[64]`, e.g. "Total Power".
 */
label: string, 
/**
 * What it measures.
 */
kind: SensorKind, 
/**
 * `input x 10^unitm`: the current value in base units (W, %, °C).
 */
value: number, 
/**
 * `units[16]` as the driver wrote it (informative only: it changed from "mW" to "W").
 */
units: string, 
/**
 * `status[64]`.
 */
status: string, };

/**
 * What a sensor measures (`type` byte at 161).
 */
export type SensorKind = "power" | "column_utilization" | "temperature" | { "other": number };

/**
 * App-wide settings.
 */
export type Settings = { 
/**
 * Colour theme. Default: follow the system.
 */
theme: Theme, 
/**
 * Base text size in CSS pixels (12..=22). Default 15.
 */
font_size: number, 
/**
 * Sampling for new conversations. Default: the engine's, with [`REPETITION_PENALTY`].
 */
sampling: Sampling, 
/**
 * Longest answer for new conversations, in tokens. Default 1024.
 */
max_tokens: number, 
/**
 * System prompt for new conversations. Default empty.
 */
system_prompt: string, 
/**
 * Processor threads Hearth's engine uses (1..=[`MAX_THREADS`]); None, the default: one per
 * physical core. Applies to the next model loaded.
 */
threads: number | null, 
/**
 * The language of the app's words. Default: the system's.
 */
language: Language, 
/**
 * The installed embedding model that searches the user's files by meaning, by name
 * (`Documents::choose_embedding_model`). Default None: the bundled all-MiniLM-L6-v2.
 */
embedding_model: string | null, 
/**
 * Whether a GGUF file added to Hearth is copied into its folder instead of linked where it
 * lies (for files on removable disks). Default off. Its one home is the model registry
 * (`App::copy_models`): this field carries it to and from Settings.
 */
copy_models: boolean, 
/**
 * Settings › Files: the languages scans are read in, as Tesseract names them ("eng",
 * "deu", "chi_sim"…; an empty list reads no scans). Default None: the app's language and
 * English ([`Settings::scan_languages`]).
 */
ocr_languages: Array<string> | null, 
/**
 * Settings › NPU: the Python environment where the FastFlow SDK installed FastFlowLM
 * (`<env>/bin/flm`), looked in first (`hearth_backends::npu::python_env`). Default None:
 * `HEARTH_FLM`, `PATH`, the standard install, the active environments. Absolute only.
 */
flm_python_env: string | null, 
/**
 * Settings › General: read every answer aloud as it is written (`crate::read_aloud`).
 * Default off.
 */
read_answers: boolean, 
/**
 * Settings › Files: whether passages get a second look by a language model. Default auto.
 */
rerank: RerankMode, };

/**
 * Whether other apps can use Hearth now, and how to reach it.
 */
export type ShareStatus = { 
/**
 * Whether the switch is on.
 */
on: boolean, 
/**
 * The address to paste into the other app, e.g. `http://127.0.0.1:11434` (None when off).
 */
url: string | null, 
/**
 * The port asked for.
 */
wanted_port: number, 
/**
 * Another program already listens at the wanted port, so Hearth took a free one (`url`
 * says which).
 */
port_taken: boolean, 
/**
 * The model other apps get: the one open in the app (None when off or none is open).
 */
model: string | null, 
/**
 * Why it is off although the user left it on: it could not start again when Hearth
 * started (None otherwise).
 */
problem: string | null, };

/**
 * Why a file or folder inside a dropped folder is not attached.
 */
export type Skip = "not_document" | "too_large" | "hidden" | "link_outside" | "repeated" | "unreadable" | "not_a_file";

/**
 * How many files of a folder were skipped for one reason.
 */
export type SkipCount = { why: Skip, count: number, };

/**
 * One passage an answer was given to read (or one page or section of them), by the number
 * the model cites it with (`[1]`).
 */
export type Source = { 
/**
 * The `[n]` in the answer, from 1.
 */
number: number, 
/**
 * The document's id in the library.
 */
document_id: number, 
/**
 * The file's name (no folder).
 */
name: string, 
/**
 * Where in the file, in words: "page 3", "section “Terms”", or "" for the whole file.
 */
place: string, 
/**
 * The page, for a PDF.
 */
page: number | null, 
/**
 * The section's index in the extracted document.
 */
section: number, 
/**
 * Characters (Unicode scalar values) `char_start..char_end` of the section's text.
 */
char_start: number, 
/**
 * End of the range (exclusive).
 */
char_end: number, 
/**
 * The passage.
 */
text: string, 
/**
 * Whether the passage was read from a scan or a photo (OCR), which its citation says.
 * Absent in sources saved before OCR: false.
 */
from_scan: boolean, 
/**
 * How the answer used it. Absent in sources saved before: given.
 */
used: SourceUse, 
/**
 * Every [n] this entry stands for, lowest first, when passages of one page or section
 * are listed as one entry (`number` is the first); empty for a single passage.
 */
numbers: Array<number>, 
/**
 * The passage's file was given to the model whole (it was short enough); an "Also read"
 * entry of such a file stands for all of it that was not cited.
 */
read_whole: boolean, };

/**
 * How an answer used a source: the order Hearth lists them in (cited first, "Also read" last).
 */
export type SourceUse = "cited" | "probably_used" | "also_read" | "given";

/**
 * The speech model offered when none is installed: what the one-click download says.
 */
export type SpeechOffer = { 
/**
 * The name to pull, pause and cancel it by (`whisper-base`).
 */
name: string, 
/**
 * Its download size in bytes.
 */
size_bytes: number, 
/**
 * The languages it understands, as ISO 639 codes.
 */
languages: Array<string>, 
/**
 * Its license.
 */
license: string, 
/**
 * Bytes already downloaded by a paused or interrupted download (0: none).
 */
paused_bytes: number, 
/**
 * It is downloading now.
 */
downloading: boolean, };

/**
 * Light, dark, or follow the desktop.
 */
export type Theme = "system" | "light" | "dark";

/**
 * How a voice download ended, when it did not fail.
 */
export type VoiceDownloaded = "installed" | "cancelled";

/**
 * What was heard.
 */
export type VoiceHeard = { 
/**
 * The words, trimmed.
 */
text: string, 
/**
 * Who heard them: "npu" (FastFlowLM's Whisper) or "cpu" (Hearth's own).
 */
backend: string, 
/**
 * The recording's length, in seconds.
 */
duration_s: number, 
/**
 * Why the NPU was left, when it failed and the processor heard instead.
 */
npu_failure: string | null, };

/**
 * The live state of a recording, sent to the front end about ten times a second.
 */
export type VoiceLevel = { 
/**
 * Seconds recorded.
 */
elapsed_s: number, 
/**
 * The last 100 ms's RMS level in dBFS (-100 for silence, 0 for full scale).
 */
level_dbfs: number, 
/**
 * The recording reached its longest (five minutes) and stopped by itself.
 */
limit_reached: boolean, };

/**
 * Whether anything can hear on this machine, and where speech models go.
 */
export type VoiceStatus = { 
/**
 * The installed speech models' names (the first is used).
 */
speech_models: Array<string>, 
/**
 * The NPU hears (FastFlowLM's Whisper needs no download).
 */
npu_hears: boolean, 
/**
 * The folder speech models are looked for in.
 */
speech_models_dir: string, 
/**
 * Listening now.
 */
listening: boolean, 
/**
 * Nothing can hear: the speech model offered for download (None when one is installed
 * or the NPU hears).
 */
offer: SpeechOffer | null, };

/**
 * How the weights are stored.
 */
export type WeightFormat = "q4nx" | "safetensors" | "gguf" | "ct2";

/**
 * What was found of XRT.
 */
export type XrtInfo = { 
/**
 * Path of `libxrt_coreutil.so*`, if found.
 */
library: string | null, 
/**
 * XRT version ("2.20.0"), from the library name or the package database.
 */
version: string | null, 
/**
 * Path of the NPU plugin `libxrt_driver_xdna.so*`, if found.
 */
npu_plugin: string | null, 
/**
 * Path of `xrt-smi`, if found.
 */
xrt_smi: string | null, };
