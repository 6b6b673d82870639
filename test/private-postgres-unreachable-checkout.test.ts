/**
 * A checkout inside a directory other users cannot enter (a clone in /root, or under `mktemp -d`), run as
 * root: PostgreSQL refuses to run as root, so the private server runs as user postgres, which can reach
 * neither the binaries under node_modules nor a data directory in the checkout. The private PostgreSQL of
 * the tests and the fault suite (a temporary one) and `npm start`'s embedded one (persistent, restarted
 * on the same data) must start all the same and answer queries.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { freePort } from '../scripts/lib/private-services.js';
import { testRedisPrefix, TEST_REDIS_URL } from './helpers/db.js';

const ROOT = path.resolve(import.meta.dirname, '..');

const CHILD = `
import { persistentPostgresDataDir, startPrivatePostgres } from './scripts/lib/private-services.ts';
import pg from 'pg';
const ask = async (url) => { const c = new pg.Client({ connectionString: url }); await c.connect(); try { return (await c.query('select 41 + 1 as n')).rows[0].n; } finally { await c.end(); } };
const out = {};
const temporary = await startPrivatePostgres({ password: 'private' });
try { out.temporary = await ask(temporary.url('postgres')); } finally { await temporary.destroy(); }
const dataDir = persistentPostgresDataDir(process.cwd());
out.dataDir = dataDir;
const first = await startPrivatePostgres({ dataDir });
try { await first.createDatabase('kept'); } finally { await first.destroy(); }
const again = await startPrivatePostgres({ dataDir });
try { out.persistent = await ask(again.url('kept')); } finally { await again.destroy(); }
console.log(JSON.stringify(out));
`;

test('as root, from a checkout other users cannot enter, a private PostgreSQL starts (temporary and persistent)', async (t) => {
  t.timeout(120_000);
  if (process.getuid?.() !== 0) {
    t.log('not root: PostgreSQL runs as this user, who can reach the checkout; the case does not arise');
    t.pass();
    return;
  }
  // A checkout in a 0700 directory: hard links of node_modules (same file system as the temporary one
  // when possible; else a copy of the few packages needed would do) and the module under test.
  const home = mkdtempSync(path.join(os.tmpdir(), 'faceid-private-home-'));
  t.is(statSync(home).mode & 0o777, 0o700);
  const checkout = path.join(home, 'faceid');
  let dataDir: string | undefined;
  try {
    mkdirSync(path.join(checkout, 'scripts', 'lib'), { recursive: true });
    execFileSync('cp', ['-al', path.join(ROOT, 'node_modules'), path.join(checkout, 'node_modules')]);
    cpSync(path.join(ROOT, 'scripts', 'lib', 'private-services.ts'), path.join(checkout, 'scripts', 'lib', 'private-services.ts'));
    cpSync(path.join(ROOT, 'package.json'), path.join(checkout, 'package.json'));
    writeFileSync(path.join(checkout, 'child.mts'), CHILD);
    chmodSync(home, 0o700);
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'child.mts'], { cwd: checkout, encoding: 'utf8', timeout: 110_000 });
    t.log(r.stderr.trim().split('\n').slice(-5).join('\n'));
    t.is(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { temporary: number; persistent: number; dataDir: string };
    dataDir = out.dataDir;
    t.is(out.temporary, 42);
    t.is(out.persistent, 42);
    t.false(out.dataDir.startsWith(home), 'the data directory is out of the checkout the server cannot reach');
    t.is(statSync(out.dataDir).mode & 0o777, 0o700);
  } finally {
    rmSync(home, { recursive: true, force: true });
    if (dataDir) rmSync(path.dirname(dataDir), { recursive: true, force: true });
  }
});

test('as root, `npm start -- --embedded` from a clone in a directory other users cannot enter serves the API', async (t) => {
  t.timeout(180_000);
  if (process.getuid?.() !== 0) {
    t.log('not root: PostgreSQL runs as this user, who can reach the checkout; the case does not arise');
    t.pass();
    return;
  }
  const home = mkdtempSync(path.join(os.tmpdir(), 'faceid-private-home-'));
  const checkout = path.join(home, 'faceid');
  let dataDir: string | undefined;
  let child: ReturnType<typeof spawn> | undefined;
  try {
    // The tracked files (as a clone has them), node_modules hard-linked, the models fetched by setup.
    mkdirSync(checkout);
    execFileSync('sh', ['-c', `git ls-files -z | xargs -0 cp --parents -t "${checkout}"`], { cwd: ROOT });
    execFileSync('cp', ['-al', path.join(ROOT, 'node_modules'), path.join(checkout, 'node_modules')]);
    mkdirSync(path.join(checkout, 'var'));
    symlinkSync(path.join(ROOT, 'var', 'models'), path.join(checkout, 'var', 'models'));
    const [port, facePort, searchPort] = [await freePort(), await freePort(), await freePort()];
    child = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts', '--embedded'], {
      cwd: checkout,
      env: {
        PATH: process.env.PATH,
        // What `npm start` sets when NODE_ENV is not given (unset means production).
        NODE_ENV: 'development',
        REDIS_URL: TEST_REDIS_URL,
        REDIS_PREFIX: testRedisPrefix(),
        PORT: String(port),
        FACE_ENGINE_PORT: String(facePort),
        SEARCH_HEALTH_PORT: String(searchPort),
        FACE_PROCESSES: '1',
        SEARCH_PROCESSES: '1',
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const until = Date.now() + 150_000;
    let health = 0;
    while (Date.now() < until && child.exitCode === null && !health) {
      health = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1000) }).then(
        (r) => r.status,
        () => 0,
      );
      if (!health) await new Promise((r) => setTimeout(r, 500));
    }
    dataDir = /data in (\/var\/tmp\/faceid-pg-[0-9a-f]+\/data)/.exec(out)?.[1];
    t.log(
      out
        .split('\n')
        .filter((l) => l.startsWith('[start]'))
        .join('\n'),
    );
    t.true(health === 200 || health === 503, `the API answers /health (${health}): ${out.slice(-1500)}`);
    t.truthy(dataDir, 'the embedded PostgreSQL keeps its data under /var/tmp');
    t.regex(out, /started an embedded PostgreSQL/);
  } finally {
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(home, { recursive: true, force: true });
    if (dataDir) rmSync(path.dirname(dataDir), { recursive: true, force: true });
  }
});
