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

async function lintProbe(folder: string, source: string, suffix = ''): Promise<ESLint.LintResult['messages']> {
  const file = path.join(ROOT, folder, `__lint_probe_${randomUUID().slice(0, 8)}${suffix}.ts`);
  writeFileSync(file, source);
  try {
    const [result] = await eslint.lintFiles([file]);
    return result!.messages;
  } finally {
    rmSync(file, { force: true });
  }
}

const restricted = (messages: ESLint.LintResult['messages']) => messages.filter((m) => m.ruleId === 'house/layers');

const cases: { folder: string; source: string; allowed: boolean }[] = [
  // the floor imports no wing, no process
  { folder: 'platform/http', source: "export * from '../../features/sign-in/index.js';\n", allowed: false },
  { folder: 'platform', source: "export { createApp } from '../processes/web/app.js';\n", allowed: false },
  // request-side code never imports worker-side code
  { folder: 'platform/http', source: "export { runQueues } from '../worker-runtime/run-queue.js';\n", allowed: false },
  { folder: 'features/face', source: "export * from './worker/pipeline/engine.js';\n", allowed: false },
  { folder: 'features/verification', source: "export * from '../search/worker/replica.js';\n", allowed: false },
  // worker-side code never imports request-side code
  { folder: 'features/face/worker', source: "export type { AnyRoute } from '../../../platform/http/route-table.js';\n", allowed: false },
  { folder: 'features/webhooks/worker', source: "export { default } from '../routes.js';\n", allowed: false },
  // another wing only through its public entry; never a process
  { folder: 'features/dedupe', source: "export * from '../identity/identity-tokens.js';\n", allowed: false },
  { folder: 'features/dedupe', source: "export { createApp } from '../../processes/web/app.js';\n", allowed: false },
  { folder: 'models', source: "export { loadConfig } from '../platform/config.js';\n", allowed: false },
  // allowed
  { folder: 'features/dedupe', source: "export * from '../identity/index.js';\n", allowed: true },
  {
    folder: 'features/webhooks/worker',
    source: "export * from '../repository.js';\nexport { runQueues } from '../../../platform/worker-runtime/run-queue.js';\n",
    allowed: true,
  },
  { folder: 'platform/http', source: "export { loadConfig } from '../config.js';\n", allowed: true },
  { folder: 'processes', source: "export { createApp } from './web/app.js';\nexport * from '../features/face/worker/worker.js';\n", allowed: true },
  {
    folder: 'test',
    source: "export { createApp } from '../processes/web/app.js';\nexport { runQueues } from '../platform/worker-runtime/run-queue.js';\n",
    allowed: true,
  },
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

/**
 * A migration imports no application code. Linted as the text of an existing migration rather than a
 * probe file: a file in migrations/, even for a moment, would be taken for a migration by a test
 * database being built meanwhile.
 */
for (const source of [
  "import { KeyRing } from '../platform/keys/key-ring.js';\nexport const ring = KeyRing;\n",
  "export * from '../features/dedupe/index.js';\n",
  "export { Operator } from '../models/index.js';\n",
  "export { createApp } from '../processes/web/app.js';\n",
]) {
  test(`refuses ${source.match(/from '([^']+)'/)![1]} in migrations/`, async (t) => {
    const [result] = await eslint.lintText(source, { filePath: path.join(ROOT, 'migrations', '20261121000000_initial.ts') });
    const hits = restricted(result!.messages);
    t.true(hits.length > 0, 'the boundary rule reports the import');
    t.is(hits[0]!.severity, 2);
    t.regex(hits[0]!.message, /a migration imports no application code/);
  });
}

test('a migration may import node: modules and knex types', async (t) => {
  const source = "import type { Knex } from 'knex';\nimport { createHash } from 'node:crypto';\nexport const f = (k: Knex) => [k, createHash];\n";
  const [result] = await eslint.lintText(source, { filePath: path.join(ROOT, 'migrations', '20261121000000_initial.ts') });
  t.deepEqual(restricted(result!.messages), []);
});

test('a Redis script in a route or a service is an error: scripts live in their store', async (t) => {
  const source =
    "import type { Redis } from '../../platform/redis/redis.js';\nexport const count = (redis: Redis, key: string) => redis.eval('return 1', 1, key);\n";
  const inService = (await lintProbe('features/dedupe', source, '-service')).filter((m) => m.ruleId === 'no-restricted-syntax');
  t.is(inService.length, 1);
  t.is(inService[0]!.severity, 2);
  t.regex(inService[0]!.message, /give the store a method/);
  t.deepEqual(
    (await lintProbe('features/dedupe', source, '-store')).filter((m) => m.ruleId === 'no-restricted-syntax'),
    [],
  );
});

test('an un-awaited promise is an error (no-floating-promises)', async (t) => {
  const messages = await lintProbe('platform', 'async function work(): Promise<void> {}\nexport function caller(): void {\n  work();\n}\n');
  const floating = messages.filter((m) => m.ruleId === '@typescript-eslint/no-floating-promises');
  t.is(floating.length, 1);
  t.is(floating[0]!.severity, 2);
});

test("a wing's manifest loads its own worker side only by a dynamic import, and never another wing's", async (t) => {
  // Linted as the manifest's own text would be (its path, the real configuration), without touching the file.
  const asManifest = async (wing: string, source: string) =>
    restricted((await eslint.lintText(source, { filePath: path.join(ROOT, 'features', wing, 'manifest.ts') }))[0]!.messages);
  t.deepEqual(await asManifest('accounts', "export const load = () => import('./worker/worker.js');\n"), []);
  t.regex((await asManifest('accounts', "export * from './worker/worker.js';\n"))[0]?.message ?? '', /request-side code never imports worker-side code/);
  t.regex((await asManifest('accounts', "export const load = () => import('../webhooks/worker/worker.js');\n"))[0]?.message ?? '', /public entry/);
  // Any other file of the wing stays on its side, dynamic import or not.
  t.true(restricted(await lintProbe('features/accounts', "export const load = () => import('./worker/worker.js');\n")).length > 0);
});
