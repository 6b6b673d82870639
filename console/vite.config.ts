// The console's build: TypeScript + Preact (JSX through esbuild, no Babel), served by the web process under /console.
import path from 'node:path';
import { defineConfig } from 'vite';

export default defineConfig({
  root: path.dirname(new URL(import.meta.url).pathname),
  base: '/console/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // No inline script or style anywhere: the CSP (platform/http/middleware/console-static.ts) forbids them.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: 'es2022',
  },
});
