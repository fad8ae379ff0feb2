// Errors in plain words. The backend's messages are written for people, but some come from the
// libraries below it with a subsystem prefix ("hub: …"), OS error numbers, environment variables
// or command-line wording. `plainError` gives a short sentence to show and keeps the original
// text as the details a user can unfold.

export interface PlainError {
  /** One or two plain sentences. */
  summary: string;
  /** The original text, when it says more than the summary (shown under "Details"). */
  details: string | null;
}

// Known situations, first match wins: what the user can understand and do.
const KNOWN: [RegExp, string][] = [
  [
    /could not reach|failed to lookup|name or service not known|network is unreachable|connection (refused|reset|timed out)|dns error|timed out/i,
    "Can't reach the internet. Check your connection, then try again: the download continues where it stopped.",
  ],
  [/not enough free disk|no space left/i, 'There is not enough free disk space. Free some space, then try again.'],
  [/no such file or directory|does not exist/i, 'That folder does not exist. Choose another folder.'],
  [/permission denied/i, 'Hearth may not read that folder. Choose a folder of your own.'],
  [/missing config\.json|does not hold a model|not a model folder/i, "That folder does not hold a model Hearth can use. Choose a .gguf file, or the folder that holds the model's config.json."],
  [/is already installed|name is taken/i, 'A model with this name is already in Hearth. Type another name in the Name field, or delete the other model under Installed first.'],
  [/is not a model Hearth knows|was not found on|404/i, 'Hearth could not find that model. Check the name, or choose one from the list.'],
  [/sha256|checksum|corrupt/i, 'The download was damaged on the way. Try again: Hearth fetches the damaged part anew.'],
];

/** Strip a library prefix ("hub: ", "engine: ") and OS error numbers; capitalize. */
function tidy(text: string): string {
  let t = text.trim().replace(/^[a-z][a-z0-9_-]*: /, '');
  t = t.replace(/ \(os error \d+\)/g, '');
  return t.charAt(0).toUpperCase() + t.slice(1);
}

export function plainError(raw: string): PlainError {
  const text = raw.trim();
  for (const [pattern, summary] of KNOWN) {
    if (pattern.test(text)) return { summary, details: text };
  }
  const summary = tidy(text) || 'Something went wrong.';
  return { summary, details: summary === text ? null : text };
}
