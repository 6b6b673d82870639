/**
 * Every error a fail-over produces on the way answers 503 `dependency_unavailable` with Retry-After,
 * never 500 (SPEC 13.2), each provoked for real against the running service (the web process as
 * processes/web.ts composes it), never by stopping the shared servers:
 *   - a read-only transaction (SQLSTATE 25006): the test database set `default_transaction_read_only`
 *     and its connections cut, as a connection that reaches an old primary turned standby sees it;
 *   - an administrator shutdown (57P01): `pg_terminate_backend` on the app's backend under a statement;
 *   - a reset connection (ECONNRESET): a TCP relay between the service and PostgreSQL resets its sockets;
 *   - Redis `READONLY`: a private redis-server made a replica (`REPLICAOF`) under the service;
 *   - a Sentinel switch: a private master + replica + 3 Sentinels asked to fail over under load.
 * The fault table of the layouts (docs/reliability.md) counts what reaches a client; these pin the cause.
 */
import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { Redis } from 'ioredis';
import Koa from 'koa';
import { randomUUID } from 'node:crypto';
import { createRedis } from '../platform/redis/redis.js';
import { errorMiddleware } from '../platform/http/middleware/errors.js';
import { startHarness, type Harness } from './helpers/harness.js';
import { client, type Answer } from './helpers/http.js';
import { createTestDatabase, TEST_PG_BASE, type TestDatabase } from './helpers/db.js';
import { newConsumer } from './helpers/principals.js';
import { freePort, startPrivateRedis } from '../scripts/lib/private-services.js';
import { startSentinelTopology } from '../scripts/lib/ha/redis-sentinel.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A TCP relay to PostgreSQL whose connections the test can reset (RST), as a dying host's would be. */
async function tcpRelay(target: { host: string; port: number }): Promise<{ port: number; resetAll(): number; close(): Promise<void> }> {
  const pairs = new Set<{ near: net.Socket; far: net.Socket }>();
  const server = net.createServer((near) => {
    const far = net.connect(target.port, target.host);
    const pair = { near, far };
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      near.destroy();
      far.destroy();
    };
    near.on('error', drop).on('close', drop);
    far.on('error', drop).on('close', drop);
    near.pipe(far).pipe(near);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port,
    resetAll: () => {
      let n = 0;
      for (const { near, far } of pairs) {
        near.resetAndDestroy();
        far.destroy();
        n++;
      }
      pairs.clear();
      return n;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** What a client may see while a part fails over: 2xx, 4xx, or 503 dependency_unavailable with Retry-After. */
function assertOnlyAllowed(t: { is: (a: unknown, b: unknown, m?: string) => void; true: (a: boolean, m?: string) => void }, res: Answer, what: string) {
  if (res.status < 500) return;
  t.is(res.status, 503, `${what}: ${res.status} ${res.text}`);
  t.is(res.body?.error, 'dependency_unavailable', `${what}: ${res.text}`);
  t.true(Number(res.headers.get('retry-after')) >= 1, `${what}: a 503 without Retry-After`);
}

// ---------------------------------------------------------------------------------------------------
// PostgreSQL: the service reaches its database through a relay the test controls.

let h: Harness;
let db: TestDatabase;
let relay: Awaited<ReturnType<typeof tcpRelay>>;
let admin: pg.Client;

test.before(async () => {
  db = await createTestDatabase();
  const direct = new URL(db.url);
  relay = await tcpRelay({ host: direct.hostname, port: Number(direct.port || 5432) });
  const viaRelay = new URL(db.url);
  viaRelay.port = String(relay.port);
  h = await startHarness({ env: { DATABASE_URL: viaRelay.toString(), DATABASE_POOL_MAX: '4' } });
  admin = new pg.Client({ connectionString: TEST_PG_BASE });
  await admin.connect();
});
test.after.always(async () => {
  await admin?.query(`ALTER DATABASE "${db.name}" RESET default_transaction_read_only`).catch(() => {});
  await admin?.end().catch(() => {});
  await h?.stop();
  await relay?.close();
  await db?.drop();
});

const patchPreferences = (me: { userId: string; token: string }, language: string) =>
  client(h.url).patch(`/users/${me.userId}/preferences`, { token: me.token, json: { language } });

/** The service's backends on its database (every connection but `except`). */
async function serviceBackends(except: number[] = []): Promise<number[]> {
  const r = await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> ALL($2::int[])', [db.name, except]);
  return r.rows.map((x) => x.pid);
}

/**
 * Holds the user's preferences row locked from a connection of the test's own, sends a PATCH that
 * waits on that lock inside its transaction, then runs `fault` against the waiting request.
 */
async function faultUnderAStatement(me: { userId: string; token: string }, fault: (waitingPid: number) => Promise<void>): Promise<Answer> {
  const holder = new pg.Client({ connectionString: db.url });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM preferences WHERE user_id = $1 FOR UPDATE', [me.userId]);
    const answer = patchPreferences(me, 'ha');
    let waiting: number | undefined;
    for (let i = 0; i < 200 && waiting === undefined; i++) {
      const r = await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'", [db.name]);
      waiting = r.rows[0]?.pid;
      if (waiting === undefined) await sleep(25);
    }
    if (waiting === undefined) throw new Error('the PATCH never waited on the lock');
    await fault(waiting);
    return await answer;
  } finally {
    await holder.query('ROLLBACK').catch(() => {});
    await holder.end().catch(() => {});
  }
}

/** A consumer of `web`'s (retried: a fault before may have left cut connections in the pool). */
async function consumerOf(web: Harness): Promise<{ userId: string; token: string }> {
  for (let i = 0; ; i++) {
    try {
      return await newConsumer(web);
    } catch (e) {
      if (i >= 20) throw e;
      await sleep(100);
    }
  }
}

/** Until the service writes again (every fault here is over once its cause is). */
async function writesAgain(me: { userId: string; token: string }): Promise<boolean> {
  for (let i = 0; i < 50; i++) {
    if ((await patchPreferences(me, 'en')).status === 200) return true;
    await sleep(100);
  }
  return false;
}

test.serial('a write refused by a read-only server (SQLSTATE 25006, an old primary turned standby) answers 503 with Retry-After', async (t) => {
  const me = await consumerOf(h);
  t.is((await patchPreferences(me, 'yo')).status, 200);
  await admin.query(`ALTER DATABASE "${db.name}" SET default_transaction_read_only = on`);
  try {
    // The pool's connections are cut: the ones opened next are read-only, like a connection that
    // reached the demoted primary during a fail-over.
    for (const pid of await serviceBackends()) await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    let readOnlySeen = 0;
    for (let i = 0; i < 6; i++) {
      const res = await patchPreferences(me, 'ha');
      t.not(res.status, 200, 'no write succeeds on a read-only server');
      assertOnlyAllowed(t, res, `PATCH #${i + 1} on a read-only server`);
      if (res.status === 503) readOnlySeen++;
    }
    t.is(readOnlySeen, 6);
    // A read still works: only writes are refused.
    t.is((await client(h.url).get(`/users/${me.userId}/preferences`, { token: me.token })).status, 200);
  } finally {
    await admin.query(`ALTER DATABASE "${db.name}" RESET default_transaction_read_only`);
    for (const pid of await serviceBackends()) await admin.query('SELECT pg_terminate_backend($1)', [pid]);
  }
  t.true(await writesAgain(me), 'writes answer 200 again once the server takes them');
});

test.serial('a statement whose backend is terminated (57P01 administrator shutdown) answers 503 with Retry-After', async (t) => {
  const me = await consumerOf(h);
  t.is((await patchPreferences(me, 'yo')).status, 200);
  const res = await faultUnderAStatement(me, async (pid) => {
    await admin.query('SELECT pg_terminate_backend($1)', [pid]);
  });
  t.is(res.status, 503, res.text);
  assertOnlyAllowed(t, res, 'PATCH whose backend was terminated');
  t.true(await writesAgain(me));
});

test.serial('a connection reset under a statement (ECONNRESET) answers 503 with Retry-After', async (t) => {
  const me = await consumerOf(h);
  t.is((await patchPreferences(me, 'yo')).status, 200);
  const res = await faultUnderAStatement(me, async () => {
    t.true(relay.resetAll() > 0, 'the service had connections through the relay');
  });
  t.is(res.status, 503, res.text);
  assertOnlyAllowed(t, res, 'PATCH whose connection was reset');
  t.true(await writesAgain(me));
});

// ---------------------------------------------------------------------------------------------------
// Redis

const OTP_ENV = { OTP_COOLDOWN_SECONDS: '0', OTP_REQUESTS_PER_IP_PER_HOUR: '100000', OTP_REQUESTS_PER_PHONE_PER_DAY: '100000' };
let phoneCounter = 0;
const nextPhone = () => `+2348039${String(process.pid % 100).padStart(2, '0')}${String(++phoneCounter).padStart(4, '0')}`;

test.serial('a Redis write refused with READONLY (the master demoted to a replica) answers 503 with Retry-After', async (t) => {
  // The service's own Redis client (platform/redis) and error rendering (platform/http/middleware/errors.ts)
  // behind a route that writes, against a private redis-server made a replica under it. (The whole web
  // process is not used here: some of its queue workers do not close after meeting READONLY.)
  const redis = await startPrivateRedis();
  const deadMaster = await freePort(); // nobody listens: the replica never syncs, and keeps refusing writes
  const conn = createRedis(redis.url);
  conn.on('error', () => {});
  const app = new Koa();
  app.use(errorMiddleware());
  app.use(async (ctx) => {
    await conn.set(`failover-errors:${randomUUID()}`, '1', 'EX', 60);
    ctx.body = { ok: true };
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  const ctl = new Redis(redis.url);
  try {
    t.is((await client(url).post('/')).status, 200);
    await ctl.call('REPLICAOF', '127.0.0.1', String(deadMaster));
    for (let i = 0; i < 3; i++) {
      const res = await client(url).post('/');
      t.is(res.status, 503, res.text);
      assertOnlyAllowed(t, res, 'a write on a read-only Redis');
    }
    await ctl.call('REPLICAOF', 'NO', 'ONE');
    t.is((await client(url).post('/')).status, 200, 'writes are answered again once Redis takes them');
  } finally {
    ctl.disconnect();
    conn.disconnect();
    server.close();
    await redis.stop();
  }
});

test.serial('a Sentinel switch under load: every answer is 2xx, 4xx or 503 with Retry-After, and the service answers after it', async (t) => {
  t.timeout(120_000);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'faceid-failover-errors-'));
  const topology = await startSentinelTopology({ dir, downAfterMs: 1000, failoverTimeoutMs: 5000, appendOnly: false });
  const web = await startHarness({
    env: { REDIS_URL: 'redis://127.0.0.1', REDIS_SENTINELS: topology.sentinelList, REDIS_SENTINEL_NAME: topology.name, ...OTP_ENV },
  });
  const statuses = new Map<number, number>();
  let running = true;
  const answers: Answer[] = [];
  const loop = async () => {
    const me = await consumerOf(web);
    while (running) {
      const res = await (Math.random() < 0.5
        ? client(web.url).post('/auth/otp/request', { json: { phone: nextPhone() } })
        : client(web.url).get(`/users/${me.userId}/preferences`, { token: me.token }));
      answers.push(res);
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    }
  };
  try {
    const clients = Array.from({ length: 4 }, loop);
    await sleep(1000);
    const oldMaster = (await topology.currentMasterPort())!;
    await topology.failover();
    await topology.waitForNewMaster(oldMaster, 30_000);
    const switchedAt = answers.length;
    await sleep(3000);
    running = false;
    await Promise.all(clients);
    t.log(`answers by status: ${JSON.stringify(Object.fromEntries(statuses))}`);
    for (const res of answers) assertOnlyAllowed(t, res, 'during a Sentinel switch');
    t.true(
      answers.slice(switchedAt).some((r) => r.status === 200),
      'OTP requests are answered again after the switch',
    );
  } finally {
    running = false;
    await web.stop();
    await topology.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
