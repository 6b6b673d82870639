/**
 * The linter (eslint.config.mjs) is part of `npm test`; these tests prove that its architecture rules
 * bite: a file that crosses a boundary fails the lint, the same import from an allowed place passes,
 * and an un-awaited promise is reported. Probe files are written into the real folders (so the real
 * per-folder configuration and type information apply) and removed afterwards.
 */
import test from 'ava';
import { ESLint } from 'eslint';
import { randomUUID } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const eslint = new ESLint({ cwd: ROOT });

async function lintProbe(folder: string, source: string): Promise<ESLint.LintResult['messages']> {
  const file = path.join(ROOT, folder, `__lint_probe_${randomUUID().slice(0, 8)}.ts`);
  writeFileSync(file, source);
  try {
    const [result] = await eslint.lintFiles([file]);
    return result!.messages;
  } finally {
    rmSync(file, { force: true });
  }
}

const restricted = (messages: ESLint.LintResult['messages']) => messages.filter((m) => m.ruleId === 'no-restricted-imports');

const cases: { folder: string; source: string; allowed: boolean }[] = [
  { folder: 'api', source: "export { runQueues } from '../workers/run-queue.js';\n", allowed: false },
  { folder: 'api/services', source: "export * from '../../workers/face/pipeline/engine.js';\n", allowed: false },
  { folder: 'workers', source: "export { createApp } from '../api/app.js';\n", allowed: false },
  { folder: 'shared', source: "export type { AnyRoute } from '../api/route-table.js';\n", allowed: false },
  { folder: 'shared', source: "export { runQueues } from '../workers/run-queue.js';\n", allowed: false },
  { folder: 'api', source: "export { loadConfig } from '../shared/config.js';\n", allowed: true },
  { folder: 'workers', source: "export { loadConfig } from '../shared/config.js';\n", allowed: true },
  { folder: 'test', source: "export { createApp } from '../api/app.js';\nexport { runQueues } from '../workers/run-queue.js';\n", allowed: true },
];

for (const c of cases) {
  test(`${c.allowed ? 'allows' : 'refuses'} ${c.source.match(/from '([^']+)'/)![1]} in ${c.folder}/`, async (t) => {
    const hits = restricted(await lintProbe(c.folder, c.source));
    if (c.allowed) t.deepEqual(hits, []);
    else {
      t.true(hits.length > 0, 'the boundary rule reports the import');
      t.is(hits[0]!.severity, 2, 'as an error, so npm test fails');
      t.regex(hits[0]!.message, /docs\/architecture\.md/);
    }
  });
}

test('a Redis script under api/ is an error: scripts live in their store (shared/stores/)', async (t) => {
  const source = "import type { Redis } from '../shared/redis.js';\nexport const count = (redis: Redis, key: string) => redis.eval('return 1', 1, key);\n";
  const inApi = (await lintProbe('api', source)).filter((m) => m.ruleId === 'no-restricted-syntax');
  t.is(inApi.length, 1);
  t.is(inApi[0]!.severity, 2);
  t.regex(inApi[0]!.message, /shared\/stores/);
  t.deepEqual(
    (await lintProbe('shared/stores', source.replace('../shared/', '../'))).filter((m) => m.ruleId === 'no-restricted-syntax'),
    [],
  );
});

test('an un-awaited promise is an error (no-floating-promises)', async (t) => {
  const messages = await lintProbe('shared', 'async function work(): Promise<void> {}\nexport function caller(): void {\n  work();\n}\n');
  const floating = messages.filter((m) => m.ruleId === '@typescript-eslint/no-floating-promises');
  t.is(floating.length, 1);
  t.is(floating[0]!.severity, 2);
});
