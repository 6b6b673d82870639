/**
 * GET /metrics with METRICS_TOKEN (SPEC 14.2): only `Authorization: Bearer <METRICS_TOKEN>` reads it, and
 * the scrape configuration the project ships sends it from a file.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, copyFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../processes/config.js';
import { ROOT, useHarness } from './helpers/harness.js';
import { productionEnv } from './helpers/production-env.js';

const TOKEN = 'scrape-token-0123456789abcdef0123456789';
const h = useHarness(test, { env: { METRICS_TOKEN: TOKEN } });

test('with METRICS_TOKEN set, /metrics answers only its bearer: none, a wrong one or a user token get 401', async (t) => {
  const get = (authorization?: string) => fetch(`${h.url}/metrics`, { headers: authorization ? { authorization } : {} });
  for (const authorization of [undefined, 'Bearer wrong-token', `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`, `Bearer ${TOKEN}x`]) {
    const res = await get(authorization);
    t.is(res.status, 401, String(authorization));
    const body = (await res.json()) as { error: string };
    t.is(body.error, 'unauthorized');
  }
  const ok = await get(`Bearer ${TOKEN}`);
  t.is(ok.status, 200);
  t.regex(await ok.text(), /^service_dependency_up\{/m);
});

test('production refuses to start without METRICS_TOKEN', (t) => {
  const base = productionEnv({ METRICS_TOKEN: '' });
  const err = t.throws(() => loadConfig(base), { instanceOf: ConfigError });
  t.regex((err as ConfigError).problems.join('\n'), /METRICS_TOKEN must be set in production/);
  t.notThrows(() => loadConfig({ ...base, METRICS_TOKEN: TOKEN }));
});

test('the shipped Prometheus configuration scrapes /metrics with the token from a file (promtool check config)', (t) => {
  const shipped = readFileSync(path.join(ROOT, 'ops/prometheus/prometheus.yml'), 'utf8');
  t.regex(shipped, /authorization:\s*\n\s*type: Bearer\s*\n\s*credentials_file: /);
  t.false(shipped.includes(TOKEN));
  // promtool checks that the credentials file exists: point it at a scratch copy.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'prom-'));
  writeFileSync(path.join(dir, 'token'), TOKEN, { mode: 0o600 });
  writeFileSync(path.join(dir, 'prometheus.yml'), shipped.replace(/credentials_file: .*/, `credentials_file: ${path.join(dir, 'token')}`));
  copyFileSync(path.join(ROOT, 'ops/prometheus/alerts.yml'), path.join(dir, 'alerts.yml'));
  const run = spawnSync('promtool', ['check', 'config', 'prometheus.yml'], { cwd: dir, encoding: 'utf8' });
  t.is(run.status, 0, run.stdout + run.stderr);
});
