/**
 * The analytics range has a documented maximum answered with 400 (before,
 * /analytics/volume silently cut the days to 3,660 while its totals counted everything), and the
 * scripts a user runs beside the service find it on its port (before, seed-registry called 3000).
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, startHarness, type Harness } from './helpers/harness.js';
import { client } from './helpers/http.js';
import { newOperator } from './helpers/principals.js';

let h: Harness;
test.before(async () => {
  h = await startHarness();
});
test.after.always(async () => {
  await h?.stop();
});

test('analytics: a range over 3,660 days is 400 validation_failed on both reports; one within it is answered', async (t) => {
  const admin = await newOperator(h, { role: 'administrator' });
  const api = client(h.url);
  for (const report of ['volume', 'accuracy']) {
    const long = await api.get(`/analytics/${report}?from=2010-01-01`, { token: admin.token });
    t.is(long.status, 400, `${report}: ${long.text}`);
    t.is(long.body.error, 'validation_failed');
    t.regex(JSON.stringify(long.body.details), /at most 3660 days/);
    const bounded = await api.get(`/analytics/${report}?from=2010-01-01&to=2019-12-31`, { token: admin.token });
    t.is(bounded.status, 200, bounded.text);
  }
  const volume = await api.get('/analytics/volume?from=2017-01-01&to=2026-12-31', { token: admin.token });
  t.is(volume.status, 200);
  t.is(volume.body.days.length, 3652, 'every day of the range, none cut');
});

/** Runs a script without blocking this process (the service under test answers from it). */
function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(path.join(ROOT, 'node_modules', '.bin', 'tsx'), args, { cwd: ROOT, env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

test("seed:registry finds a service started on another port (npm start's service file), without PORT in its environment", async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'faceid-service-'));
  const file = path.join(dir, 'service.json');
  writeFileSync(file, JSON.stringify({ pid: process.pid, url: h.url }));
  const env: NodeJS.ProcessEnv = { ...process.env, FACEID_SERVICE_FILE: file };
  delete env.PORT;
  delete env.REGISTRY_URL;
  const first = await run(['scripts/seed-registry.ts'], env);
  t.is(first.status, 0, `${first.stdout}${first.stderr}`);
  t.true(first.stdout.includes(`Registry ${h.url}/api:`), first.stdout);
  // PORT itself is followed too.
  const withPort = await run(['scripts/seed-registry.ts'], { ...env, FACEID_SERVICE_FILE: path.join(dir, 'none.json'), PORT: new URL(h.url).port });
  t.is(withPort.status, 0, `${withPort.stdout}${withPort.stderr}`);
  t.regex(withPort.stdout, /6 already present/);
});
