// @vitest-environment node
// The UI's layering, like the Rust crates' (crates/hub/tests/layering.rs): only the stores
// (lib/*.svelte.ts) and main.ts, which builds them, talk to the backend through `api`. Components
// get stores and data as props, so none of them may import the api module.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const src = fileURLToPath(new URL('..', import.meta.url));

function svelteFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return svelteFiles(path);
    return entry.name.endsWith('.svelte') ? [path] : [];
  });
}

/** The modules a file imports (static and dynamic), as written. */
function imports(text: string): string[] {
  return [...text.matchAll(/\bimport\b[^'"]*?['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1] ?? m[2]);
}

describe('layering', () => {
  it('finds the components', () => {
    expect(svelteFiles(src).length).toBeGreaterThan(10);
  });

  it('no component imports the api module or Tauri itself', () => {
    const offending = svelteFiles(src).flatMap((file) =>
      imports(readFileSync(file, 'utf8'))
        .filter((module) => /(^|\/)api(\.ts)?$/.test(module) || module.startsWith('@tauri-apps/'))
        .map((module) => `${relative(src, file)} imports ${module}`),
    );
    expect(offending).toEqual([]);
  });
});
