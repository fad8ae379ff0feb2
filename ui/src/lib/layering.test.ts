// The UI's layering, like the Rust crates' (crates/hub/tests/hub/layering.rs): only the stores
// (lib/*.svelte.ts) and main.ts, which builds them, talk to the backend through `api`. Components
// get stores and data as props, so none of them may import the api module (or Tauri itself).
import { describe, expect, it } from 'vitest';

/** Every component's source text, by path. */
const components = import.meta.glob<string>(['../**/*.svelte'], { query: '?raw', import: 'default', eager: true });

/** The modules a file imports (static and dynamic), as written. */
function imports(text: string): string[] {
  return [...text.matchAll(/\bimport\b[^'"]*?['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1] ?? m[2]);
}

describe('layering', () => {
  it('reads the components', () => {
    expect(Object.keys(components).length).toBeGreaterThan(10);
    expect(Object.values(components).every((text) => text.includes('<'))).toBe(true);
  });

  it('no component imports the api module or Tauri itself', () => {
    const offending = Object.entries(components).flatMap(([file, text]) =>
      imports(text)
        .filter((module) => /(^|\/)api(\.ts)?$/.test(module) || module.startsWith('@tauri-apps/'))
        .map((module) => `${file} imports ${module}`),
    );
    expect(offending).toEqual([]);
  });
});
