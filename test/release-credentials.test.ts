/**
 * SPEC 14.2 "HA": under the launcher (`npm start`, `start:ha`), the migrations run with the owner's
 * connection (the plan's `releaseEnv`), and no application process receives it: a process holds the
 * application role's credentials only. start:ha puts MIGRATION_DATABASE_URL there (the owner under
 * `--hosts`, the superuser on one machine); test/ha-hosts-credentials.test.ts reads the environment of
 * the processes of a real `--hosts` layout.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from './helpers/harness.js';
import { appRoleUrl, createTestDatabase } from './helpers/db.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('the release gets the owner connection; the processes never do, even when the launcher inherited it', async (t) => {
  t.timeout(120_000);
  const db = await createTestDatabase();
  const appUrl = await appRoleUrl(db.url);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'faceid-release-'));
  const seenFile = path.join(dir, 'seen.json');
  writeFileSync(
    path.join(dir, 'web.mjs'),
    `import { writeFileSync } from 'node:fs';
writeFileSync(${JSON.stringify(seenFile)}, JSON.stringify({ DATABASE_URL: process.env.DATABASE_URL ?? null, MIGRATION_DATABASE_URL: process.env.MIGRATION_DATABASE_URL ?? null }));
process.on('SIGTERM', () => process.exit(0));
setInterval(() => {}, 1000);
`,
  );
  writeFileSync(
    path.join(dir, 'launch.ts'),
    `import { launch } from ${JSON.stringify(path.join(ROOT, 'platform', 'processes', 'launcher.ts'))};
const web = { name: 'web', file: ${JSON.stringify(path.join(dir, 'web.mjs'))}, role: 'web', drainsFirst: true };
launch({ name: 'test', prepare: async () => ({
  env: { ...process.env, DATABASE_URL: ${JSON.stringify(appUrl)} },
  releaseEnv: { MIGRATION_DATABASE_URL: ${JSON.stringify(db.url)} },
  copies: [{ name: 'web', process: web, index: 0, env: {} }],
  url: 'http://127.0.0.1:9',
}) }, ${JSON.stringify(ROOT)});
`,
  );
  const launcher = spawn(process.execPath, ['--import', 'tsx', path.join(dir, 'launch.ts')], {
    cwd: ROOT,
    detached: true,
    // Inherited from the shell that ran the launcher: still never handed to a process.
    env: {
      ...process.env,
      NODE_ENV: 'development',
      MIGRATION_DATABASE_URL: db.url,
      SUPERVISOR_STATUS_FILE: path.join(dir, 'sup.json'),
      FACEID_SERVICE_FILE: path.join(dir, 'service.json'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  launcher.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  launcher.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  try {
    for (let i = 0; i < 600 && !existsSync(seenFile); i++) await sleep(100);
    t.true(existsSync(seenFile), `the process started after the release (the app role cannot run it)\n${output}`);
    const seen = JSON.parse(readFileSync(seenFile, 'utf8')) as Record<string, string | null>;
    t.is(seen.DATABASE_URL, appUrl);
    t.is(seen.MIGRATION_DATABASE_URL, null);
    t.regex(output, /running migrations/);
    t.notRegex(output, /migrations failed/);
  } finally {
    try {
      process.kill(-launcher.pid!, 'SIGTERM');
    } catch {
      // already gone
    }
    await new Promise((r) => launcher.once('exit', r));
    await db.drop();
  }
});
