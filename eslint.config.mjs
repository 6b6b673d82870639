// ESLint (flat config) with typescript-eslint, run by `npm test` (npm run lint).
//
// Two jobs:
// 1. Correctness rules the compiler does not cover, above all no-floating-promises: an un-awaited
//    promise in a request path is a lost error or a write the client thinks happened.
// 2. The house's import rules (docs/architecture.md), one local rule, `house/layers`:
//    - platform/ (the floor) imports nothing of features/ or processes/; models/ imports only models/;
//    - a wing (features/<wing>/) imports platform/, models/, its own files and another wing's public
//      entry (features/<other>/index.ts) only, never processes/;
//    - worker-side code (features/<wing>/worker/, platform/worker-runtime/) is imported by no other
//      file of the floor or the wings (processes/ compose it), and imports no request-side code
//      (platform/http/, a wing's routes); a wing's manifest.ts alone loads its own worker side, and
//      only by a dynamic import (`workers`, started by the process of that role, never by the web
//      process's request side);
//    - a migration (migrations/) imports no application code (platform/, features/, processes/,
//      models/): it must do forever what it did when written, so it carries a frozen copy of what it needs;
//    processes/ (the composition roots), scripts/, bench/, chaos/ and test/ may import anything.
import js from '@eslint/js';
import path from 'node:path';
import tseslint from 'typescript-eslint';

const ROOT = import.meta.dirname;
const WHY = ' (docs/architecture.md)';

/** Where a repository file stands: its layer, its wing, and which side of the queue it is on. */
function place(rel) {
  const parts = rel.split('/');
  const layer = parts[0];
  const wing = layer === 'features' ? parts[1] : undefined;
  const workerSide = (layer === 'features' && parts.includes('worker')) || rel.startsWith('platform/worker-runtime/');
  const requestSide =
    rel.startsWith('platform/http/') || rel.startsWith('processes/web/') || (layer === 'features' && !workerSide && /(^|-)routes\.ts$/.test(parts.at(-1)));
  return { rel, layer, wing, workerSide, requestSide };
}

function verdict(from, to, dynamic) {
  if (from.layer === 'migrations' && ['platform', 'features', 'processes', 'models'].includes(to.layer))
    return `a migration imports no application code (${to.layer}/): inline a frozen copy of what it needs`;
  if (from.layer === 'models' && to.layer !== 'models') return 'models/ imports only models/';
  if (from.layer === 'platform' && to.layer !== 'platform' && to.layer !== 'models')
    return 'platform/ is the floor: it imports no wing (features/) and no process (processes/)';
  if (from.layer === 'features') {
    if (to.layer !== 'platform' && to.layer !== 'models' && to.layer !== 'features')
      return `a wing imports platform/, models/ and other wings' public entries, not ${to.layer}/`;
    if (to.layer === 'features' && to.wing !== from.wing && to.rel !== `features/${to.wing}/index.ts`)
      return `another wing is used through its public entry only: import features/${to.wing}/index.ts`;
  }
  const manifestLoadsOwnWorker = dynamic && from.wing !== undefined && from.rel === `features/${from.wing}/manifest.ts` && to.wing === from.wing;
  if ((from.layer === 'platform' || from.layer === 'features') && to.workerSide && !from.workerSide && !manifestLoadsOwnWorker)
    return "request-side code never imports worker-side code (a wing's worker/, platform/worker-runtime/): processes/ compose it";
  if (from.workerSide && to.requestSide) return 'worker-side code never imports request-side code (platform/http/, routes)';
  return null;
}

const layersRule = {
  meta: { type: 'problem', schema: [] },
  create(context) {
    const file = path.relative(ROOT, context.filename).split(path.sep).join('/');
    if (file.startsWith('..')) return {};
    const from = place(file);
    const check = (node) => {
      const spec = node.source && node.source.type === 'Literal' ? node.source.value : null;
      if (typeof spec !== 'string' || !spec.startsWith('.')) return;
      let target = path
        .relative(ROOT, path.resolve(path.dirname(context.filename), spec))
        .split(path.sep)
        .join('/');
      target = target.replace(/\.js$/, '.ts');
      const why = verdict(from, place(target), node.type === 'ImportExpression');
      if (why) context.report({ node: node.source, message: `${spec}: ${why}${WHY}.` });
    };
    return { ImportDeclaration: check, ExportAllDeclaration: check, ExportNamedDeclaration: check, ImportExpression: check };
  },
};

export default tseslint.config(
  {
    ignores: ['node_modules/**', 'var/**', 'build/**', 'coverage/**', '.scratch/**', 'console/dist/**', '**/*.d.ts'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      // The compiler's noUnusedLocals already reports these; `_`-prefixed parameters are deliberate.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // Explicit `any` is rare here and always at a boundary with an untyped library; flagged in review, not CI.
      '@typescript-eslint/no-explicit-any': 'off',
      // Redis event-stream and ANSI parsing use control characters on purpose.
      'no-control-regex': 'off',
    },
  },
  {
    files: ['**/*.ts'],
    ignores: ['scripts/**', 'bench/**', 'chaos/**', 'test/**', 'console/**'],
    plugins: { house: { rules: { layers: layersRule } } },
    rules: { 'house/layers': 'error' },
  },
  {
    // Redis scripts live in their store, beside the keys they touch, never in a route or a service.
    files: ['platform/http/**/*.ts', 'features/**/*routes.ts', 'features/**/*service.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'CallExpression[callee.property.name=/^(eval|evalsha|defineCommand)$/]',
          message: 'No Redis script in a route or a service: give the store a method (docs/architecture.md).',
        },
      ],
    },
  },
  {
    // Plain JavaScript config files: no type information.
    files: ['**/*.mjs', '**/*.js'],
    ...tseslint.configs.disableTypeChecked,
  },
);
