import { defineConfig } from 'vite';
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('.', import.meta.url));

// The UI lives in ui/; the Tauri shell loads ui/dist (tauri.conf.json: build.frontendDist).
export default defineConfig({
  root,
  plugins: [svelte()],
  clearScreen: false,
  base: './',
  server: { host: '127.0.0.1', port: 5173, strictPort: true },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // No inline assets: the content security policy allows only same-origin files.
    assetsInlineLimit: 0,
  },
  resolve: process.env.VITEST ? { conditions: ['browser'] } : undefined,
  test: {
    root,
    environment: 'jsdom',
    include: ['src/**/*.test.ts'],
  },
});
