// A GGUF file added to Hearth is linked, not copied (issue 49): what the Models store says
// after adding one, and "Find it" (pick the file again: relinked, cancelled, or refused).
import { describe, expect, it } from 'vitest';
import { ModelsStore, type ModelsApi } from './models.svelte';
import type { InstalledModel } from './models';

const overview = { machine: { total_memory: 1, available_memory: 1, free_disk: 1 }, catalog: [], installed: [], partial: [], downloading: [], copy_models: false };

const linked = (name: string, file: string, state: 'ready' | 'missing' | 'changed') =>
  ({ name, size_bytes: 9_761, linked: { file, state } }) as unknown as InstalledModel;

function api(parts: Partial<ModelsApi>): ModelsApi & { calls: string[] } {
  const calls: string[] = [];
  return { modelsOverview: async () => { calls.push('overview'); return overview; }, ...parts, calls } as unknown as ModelsApi & { calls: string[] };
}

describe('linked GGUF files in the Models store', () => {
  it('says a GGUF file was linked where it is, with what it costs in Hearth', async () => {
    const store = new ModelsStore(api({ importModel: async () => linked('tiny', '/d/tiny.gguf', 'ready') }), () => {});
    expect(await store.importPath('/d/tiny.gguf', null)).toBe(true);
    expect(store.notice).toBe("Added tiny: linked where it is, using 9.76 KB in Hearth's folder.");
  });

  it('Find it: the file picked again is linked, and the picker is told', async () => {
    let changed = 0;
    const relinked: string[][] = [];
    const fake = api({
      pickModelFile: async (title: string) => { relinked.push([title]); return '/new/place/tiny.gguf'; },
      relinkModel: async (name: string, path: string) => { relinked.push([name, path]); return linked(name, path, 'ready'); },
    });
    const store = new ModelsStore(fake, () => changed++);
    await store.findLinked('tiny');
    expect(relinked).toEqual([['Find the GGUF file of tiny'], ['tiny', '/new/place/tiny.gguf']]);
    expect(store.notice).toBe('tiny reads /new/place/tiny.gguf again.');
    expect(store.errors).toEqual({});
    expect(changed).toBe(1);
    expect(fake.calls).toContain('overview');
  });

  it('Find it, cancelled: nothing is linked and nothing is said', async () => {
    let asked = false;
    const store = new ModelsStore(
      api({ pickModelFile: async () => null, relinkModel: async () => { asked = true; return linked('x', 'y', 'ready'); } }),
      () => {},
    );
    await store.findLinked('tiny');
    expect(asked).toBe(false);
    expect(store.notice).toBeNull();
    expect(store.errors).toEqual({});
  });

  it('Find it with another model: the plain refusal stays on that model', async () => {
    const refusal = 'hub: /d/other.gguf is a different file from the one tiny was added from (its header is not the same), so tiny was left as it was. Pick the file you added, or add this one as a new model';
    const store = new ModelsStore(
      api({
        pickModelFile: async () => '/d/other.gguf',
        relinkModel: async () => { throw { code: 'invalid_input', message: refusal, detail: null, params: {} }; },
      }),
      () => {},
    );
    await store.findLinked('tiny');
    expect(store.errors.tiny).toContain('is a different file');
    expect(store.notice).toBeNull();
  });
});
