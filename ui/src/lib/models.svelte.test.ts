import { describe, expect, it } from 'vitest';
import { ModelsStore, type ModelsApi } from './models.svelte';
import type { InstalledModel, PullProgress } from './models';

const overview = { machine: { total_memory: 1, available_memory: 1, free_disk: 1 }, catalog: [], installed: [], partial: [], downloading: [] };

function api(importModel: ModelsApi['importModel']): ModelsApi {
  return { modelsOverview: async () => overview, importModel } as unknown as ModelsApi;
}

describe('ModelsStore.importPath', () => {
  it('shows the conversion while it runs, then says what was imported and refreshes the picker', async () => {
    let changed = 0;
    const seen: (PullProgress | null)[] = [];
    let store: ModelsStore;
    store = new ModelsStore(
      api(async (path, name, onProgress) => {
        seen.push(store.importRunning?.progress ?? null);
        onProgress({ name: 'tiny', phase: 'converting', done_bytes: 5, total_bytes: 10 } as PullProgress);
        seen.push(store.importRunning?.progress ?? null);
        expect([path, name]).toEqual(['/d/tiny.gguf', null]);
        return { name: 'tiny', size_bytes: 90_000_000 } as InstalledModel;
      }),
      () => changed++,
    );
    expect(await store.importPath('/d/tiny.gguf', null)).toBe(true);
    expect(seen[0]).toBeNull();
    expect(seen[1]?.phase).toBe('converting');
    expect(store.importRunning).toBeNull();
    expect(store.notice).toBe('Imported tiny (90.0 MB); the original stays where it was.');
    expect(changed).toBe(1);
  });

  it('keeps the error for the form and refuses a second import while one runs', async () => {
    let release: () => void = () => {};
    const store = new ModelsStore(
      api(
        () =>
          new Promise((_, reject) => {
            release = () => reject(new Error('There is nothing at /d/x.gguf.'));
          }),
      ),
    );
    const first = store.importPath('/d/x.gguf', null);
    expect(await store.importPath('/d/y.gguf', null)).toBe(false);
    release();
    expect(await first).toBe(false);
    expect(store.importError).toBe('There is nothing at /d/x.gguf.');
  });
});
