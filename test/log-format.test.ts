/**
 * What a process prints at start. In development (the `npm start` default) readable pino-pretty lines,
 * one per entry, with the settings that differ from their defaults instead of all of them; JSON lines
 * elsewhere (LOG_FORMAT=json, the test and production default). Secrets never appear either way.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { describeConfig, loadConfig } from '../processes/config.js';
import { freePort } from '../scripts/lib/private-services.js';
import { createTestDatabase, testRedisPrefix, TEST_REDIS_URL, type TestDatabase } from './helpers/db.js';
import { ROOT } from './helpers/harness.js';

const ADMIN_PASSWORD = 'Sup3r-secret-admin-pass';
let db: TestDatabase;

test.before(async () => {
  db = await createTestDatabase();
});
test.after.always(async () => {
  await db?.drop();
});

/** Runs processes/web.ts until it says it listens, then stops it; its stdout lines. */
async function webOutput(env: Record<string, string>): Promise<string[]> {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'faceid-log-'));
  const child = spawn(process.execPath, ['--import', 'tsx', 'processes/web.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: db.url,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: testRedisPrefix(),
      PORT: String(await freePort()),
      SMS_OUTBOX_FILE: path.join(tmp, 'outbox.jsonl'),
      ADMIN_IDENTIFIER: 'first-admin',
      ADMIN_PASSWORD,
      SMS_WEBHOOK_TOKEN: 'gateway-bearer-secret',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const until = Date.now() + 60_000;
  while (!/web listening/.test(out) && child.exitCode === null && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
  child.kill('SIGTERM');
  await exited;
  if (!/web listening/.test(out)) throw new Error(`web did not start: ${out}\n${err}`);
  return out.split('\n').filter((l) => l.trim() !== '');
}

test('development: readable lines, only the settings off their defaults, no secret', async (t) => {
  t.timeout(90_000);
  const lines = await webOutput({ NODE_ENV: 'development' });
  t.log(lines.slice(0, 4).join('\n'));
  for (const line of lines) {
    t.false(line.trimStart().startsWith('{'), `not a JSON line: ${line.slice(0, 120)}`);
    t.false(line.includes(ADMIN_PASSWORD) || line.includes('gateway-bearer-secret'), 'a secret was printed');
  }
  const starting = lines.find((l) => l.includes('web starting'));
  t.truthy(starting, 'the start line');
  t.regex(starting!, /INFO/);
  t.true(starting!.length < 600, `one readable line, not the whole configuration (${starting!.length} characters)`);
  t.true(starting!.includes('ADMIN_IDENTIFIER'), 'a setting changed from its default is shown');
  t.false(starting!.includes('VECTOR_INDEX_FACTORY'), 'a setting at its default is not');
  t.truthy(lines.find((l) => /web listening/.test(l) && l.includes('http://')));
});

test('LOG_FORMAT=json: one JSON object a line, the whole configuration, secrets masked', async (t) => {
  t.timeout(90_000);
  const lines = await webOutput({ NODE_ENV: 'development', LOG_FORMAT: 'json' });
  const entries = lines.map((l) => JSON.parse(l) as { msg: string; config?: Record<string, unknown> });
  const starting = entries.find((e) => e.msg === 'web starting');
  t.is(Object.keys(starting!.config!).length, Object.keys(describeConfig(loadConfig({ NODE_ENV: 'development' }))).length, 'every setting');
  t.is(starting!.config!.ADMIN_PASSWORD, 'set');
  t.is(starting!.config!.SMS_WEBHOOK_TOKEN, 'set');
  for (const line of lines) t.false(line.includes(ADMIN_PASSWORD) || line.includes('gateway-bearer-secret'));
});

test('the default format: pretty in development, JSON in test and production', (t) => {
  t.is(loadConfig({ NODE_ENV: 'development' }).runtime.logFormat, 'pretty');
  t.is(loadConfig({ NODE_ENV: 'test' }).runtime.logFormat, 'json');
  const production = {
    NODE_ENV: 'production',
    JWT_PRIVATE_KEY: 'k',
    BIOMETRIC_KEYS: `k1:${Buffer.alloc(32, 3).toString('base64')}`,
    LINK_NUMBER_HASH_KEY: Buffer.alloc(32, 9).toString('base64'),
    SMS_TRANSPORT: 'webhook',
    SMS_WEBHOOK_URL: 'https://sms.invalid',
    REGISTRY_SIMULATOR: 'false',
    REGISTRY_URL: 'https://registry.invalid',
    REDIS_URL: 'redis://:a-redis-password@redis.internal:6379',
    METRICS_TOKEN: 'a-metrics-token-of-at-least-32-characters',
    OTP_SECRET: 'an-otp-secret-of-at-least-32-characters',
  };
  t.is(loadConfig(production).runtime.logFormat, 'json');
});
