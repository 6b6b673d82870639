// ESLint (flat config) with typescript-eslint, run by `npm test` (npm run lint).
//
// Two jobs:
// 1. Correctness rules the compiler does not cover, above all no-floating-promises: an un-awaited
//    promise in a request path is a lost error or a write the client thinks happened.
// 2. The architecture's import boundaries (docs/architecture.md): api/ and workers/ never import each
//    other, and shared/ (the ground both stand on) imports neither. processes/ (the composition roots),
//    scripts/, bench/ and test/ may import anything.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** An import specifier that reaches into one of the named top-level layers, relative or not. */
const layerImport = (...layers) => `^(\\.{1,2}/)+(${layers.join('|')})(/|$)`;

const boundary = (layers, why) => ['error', { patterns: [{ regex: layerImport(...layers), message: why }] }];

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
    files: ['api/**/*.ts'],
    rules: {
      'no-restricted-imports': boundary(['workers'], 'api/ must not import workers/: share the code through shared/ (docs/architecture.md).'),
      // Redis scripts live in their store (shared/stores/), beside the keys they touch.
      'no-restricted-syntax': [
        'error',
        {
          selector: 'CallExpression[callee.property.name=/^(eval|evalsha|defineCommand)$/]',
          message: 'No Redis script under api/: give the store in shared/stores/ a method (docs/architecture.md).',
        },
      ],
    },
  },
  {
    files: ['workers/**/*.ts'],
    rules: { 'no-restricted-imports': boundary(['api'], 'workers/ must not import api/: share the code through shared/ (docs/architecture.md).') },
  },
  {
    files: ['shared/**/*.ts'],
    rules: {
      'no-restricted-imports': boundary(
        ['api', 'workers', 'processes'],
        'shared/ is the ground layer: it imports neither api/, workers/ nor processes/ (docs/architecture.md).',
      ),
    },
  },
  {
    // Plain JavaScript config files: no type information.
    files: ['**/*.mjs', '**/*.js'],
    ...tseslint.configs.disableTypeChecked,
  },
);
