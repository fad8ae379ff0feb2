import { describe, expect, it } from 'vitest';
import { Drops, dropNote, folderNote, type DropsApi } from './drops.svelte';
import type { DocumentsStore } from './documents.svelte';
import type { ModelsStore } from './models.svelte';
import type { Dropped } from './bindings';
import { Notifications } from './notifications.svelte';
import { Shell } from './shell.svelte';

/** A drop as the backend classifies it (crates/app's drop.rs). */
function drop(kind: Dropped['kind'], names: string[], left: Dropped['left'] = [], token: string | null = 'drop-0', folders: Dropped['folders'] = []): Dropped {
  return { kind, names, left, folders, reason: '', token };
}

/** The drops store over stores that record what they are asked. */
function setup() {
  const asked: string[] = [];
  const documents = { attachDropped: async (token: string) => void asked.push(`attach ${token}`) } as unknown as DocumentsStore;
  const models = { importDropped: async (token: string, shown: string) => (asked.push(`import ${token} ${shown}`), true) } as unknown as ModelsStore;
  const api = { onFileDrag: async () => () => {}, onDropped: async () => () => {} } as unknown as DropsApi;
  const shell = new Shell();
  const notifications = new Notifications();
  return { asked, shell, notifications, drops: new Drops(api, documents, models, shell, notifications) };
}

describe('Drops', () => {
  it('attaches a drop of documents by its token, and says nothing more', async () => {
    const { asked, drops, notifications, shell } = setup();
    await drops.take(drop('documents', ['notes.md', 'report.pdf']));
    expect(asked).toEqual(['attach drop-0']);
    expect(notifications.toasts).toEqual([]);
    expect(shell.view).toBe('chat');
  });

  it('imports a dropped model by its token and opens Models to show it', async () => {
    const { asked, drops, shell } = setup();
    await drops.take(drop('model', ['qwen.gguf']));
    expect(asked).toEqual(['import drop-0 qwen.gguf']);
    expect(shell.view).toBe('models');
  });

  it('a mixed drop attaches the documents and says why the model was not imported', async () => {
    const { asked, drops, notifications } = setup();
    await drops.take(drop('documents', ['report.pdf'], [{ name: 'qwen.gguf', why: 'model_with_documents' }]));
    expect(asked).toEqual(['attach drop-0']);
    expect(notifications.toasts.map((t) => t.message)).toEqual(['qwen.gguf was not imported: drop a model on its own to import it.']);
  });

  it('files Hearth cannot use are said plainly, and nothing is asked of the backend', async () => {
    const { asked, drops, notifications } = setup();
    await drops.take(drop('neither', [], [{ name: 'setup.exe', why: 'unknown' }], null));
    expect(asked).toEqual([]);
    expect(notifications.toasts.map((t) => t.message)).toEqual([
      expect.stringMatching(/^Hearth can use none of the dropped files: .* setup\.exe is not a kind of file Hearth reads\.$/),
    ]);
  });

  it('a folder attaches by its token and says what it gave and skipped (issue 53 #3)', async () => {
    const { asked, drops, notifications, shell } = setup();
    const folder = { name: 'Tax papers', files: 12, skipped: [{ why: 'not_document' as const, count: 2 }, { why: 'too_large' as const, count: 1 }], cuts: [] };
    await drops.take(drop('documents', ['Tax papers'], [], 'drop-0', [folder]));
    expect(asked).toEqual(['attach drop-0']);
    expect(shell.view).toBe('chat');
    expect(notifications.toasts.map((t) => [t.level, t.message])).toEqual([
      ['warning', 'Tax papers: 12 files attached; 3 skipped: 2 are not documents Hearth reads, 1 is too large.'],
    ]);
  });
});

describe('dropNote', () => {
  it('says nothing when the whole drop is taken, or nothing was dropped', () => {
    expect(dropNote(drop('model', ['qwen.gguf']))).toBeNull();
    expect(dropNote(drop('neither', [], [], null))).toBeNull();
  });

  it('names each file left and why', () => {
    const note = dropNote(drop('model', ['a.gguf'], [
      { name: 'b.gguf', why: 'another_model' },
      { name: 'holiday', why: 'folder' },
    ]));
    expect(note).toBe('b.gguf was not imported: drop one model at a time. holiday holds no model and no file Hearth reads.');
  });

  it('says a folder taken in full, and the bound that cut one', () => {
    expect(folderNote({ name: 'Letters', files: 1, skipped: [], cuts: [] })).toBe('Letters: 1 file attached.');
    expect(folderNote({ name: 'Empty', files: 0, skipped: [{ why: 'hidden', count: 1 }], cuts: [] })).toBeNull();
    expect(folderNote({ name: 'Huge', files: 2000, skipped: [], cuts: [{ why: 'files', limit: 2000 }, { why: 'entries', limit: 20000 }] })).toBe(
      'Huge: 2,000 files attached; only the first 2,000 files are taken; it holds more than 20,000 entries, so only those were looked at.',
    );
  });
});
