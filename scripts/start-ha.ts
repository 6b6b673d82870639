/**
 * `npm run start:ha`: the high-availability layout on loopback, from Debian packages and this project
 * alone (docs/deployment.md gives the same parts on separate machines):
 *   - Redis master + replica + 3 Sentinels (scripts/lib/ha/redis-sentinel.ts); every connection of
 *     every process goes through the Sentinels (REDIS_SENTINELS, REDIS_SENTINEL_NAME);
 *   - PostgreSQL primary + synchronous streaming standby under Patroni with etcd, automatic failover
 *     (scripts/lib/ha/postgres-patroni.ts), and HAProxy in front giving one address (DATABASE_URL);
 *   - 2 web processes behind HAProxy answering on PORT (default 3000), 2 face and 2 search processes,
 *     each restarted when it dies (scripts/supervisor.ts, as `npm start` does).
 * Writes var/ha/layout.json (every part's port and pid, rewritten as roles and pids change: after a
 * failover `redis.master` and `postgres.primary` name the promoted node). Ctrl-C stops everything.
 * The data of a run lives in var/ha and is wiped at the next start.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { freePort } from './lib/private-services.js';
import { startHaproxy } from './lib/ha/haproxy.js';
import { isAlive, startPatroniCluster, type PatroniCluster } from './lib/ha/postgres-patroni.js';
import { startSentinelTopology, type SentinelTopology } from './lib/ha/redis-sentinel.js';
import { Supervisor, supervisorOptions } from './supervisor.js';
import { loadConfig } from '../platform/config.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const HA_DIR = path.join(ROOT, 'var', 'ha');
export const LAYOUT_FILE = path.join(HA_DIR, 'layout.json');
const say = (msg: string) => console.log(`[start:ha] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const nodeArgs = (file: string) => ['--import', 'tsx', file];
const SENTINEL_NAME = 'faceid';

interface Part {
  port: number;
  pid: number | null;
}

/**
 * Waits until HAProxy sends connections only to the primary: it starts with every server in service
 * and takes the standby out after its first failed checks (`fall 2`, one a second), so a connection
 * made in the first seconds may reach the standby. Ready after 10 connections in a row reach a node
 * out of recovery.
 */
async function waitForPrimaryOnly(proxyPort: number): Promise<void> {
  await sleep(2500);
  let inARow = 0;
  for (let i = 0; i < 300 && inARow < 10; i++) {
    const c = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${proxyPort}/postgres`, connectionTimeoutMillis: 1000 });
    try {
      await c.connect();
      const r = await c.query('SELECT pg_is_in_recovery() AS standby');
      inARow = r.rows[0]?.standby === false ? inARow + 1 : 0;
    } catch {
      inARow = 0;
    } finally {
      await c.end().catch(() => {});
    }
    if (inARow < 10) await sleep(100);
  }
  if (inARow < 10) throw new Error('the PostgreSQL proxy does not lead to the primary alone');
}

async function createDatabase(proxyPort: number): Promise<void> {
  await waitForPrimaryOnly(proxyPort);
  for (let i = 0; i < 100; i++) {
    const c = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${proxyPort}/postgres`, connectionTimeoutMillis: 1000 });
    try {
      await c.connect();
      const exists = await c.query("SELECT 1 FROM pg_database WHERE datname = 'faceid'");
      if (!exists.rowCount) await c.query('CREATE DATABASE faceid');
      return;
    } catch {
      await sleep(200);
    } finally {
      await c.end().catch(() => {});
    }
  }
  throw new Error('PostgreSQL does not answer through the proxy');
}

async function main(): Promise<void> {
  const tools = spawnSync('bash', [path.join(ROOT, 'scripts', 'ensure-ha-tools.sh')], { stdio: 'inherit' });
  if (tools.status !== 0) throw new Error('the Debian packages of the layout are missing (scripts/ensure-ha-tools.sh)');
  rmSync(HA_DIR, { recursive: true, force: true });
  mkdirSync(HA_DIR, { recursive: true });

  let redis: SentinelTopology | undefined;
  let postgres: PatroniCluster | undefined;
  let balancer: ChildProcess | undefined;
  let supervisor: Supervisor | undefined;
  let stopping = false;
  const stopAll = async (why: string, code = 0) => {
    if (stopping) return;
    stopping = true;
    say(`stopping (${why}): web first (it drains), then the workers, the balancer, PostgreSQL, Redis...`);
    const grace = Number(process.env.SHUTDOWN_DRAIN_MS ?? 10_000) + 5_000;
    if (supervisor) {
      await supervisor.stop(
        supervisor.names().filter((n) => n.startsWith('web')),
        grace,
      );
      await supervisor.stop(supervisor.names(), grace);
    }
    balancer?.kill('SIGTERM');
    await postgres?.stop();
    await redis?.stop();
    rmSync(LAYOUT_FILE, { force: true });
    say('stopped');
    process.exit(code);
  };
  process.on('SIGINT', () => void stopAll('SIGINT'));
  process.on('SIGTERM', () => void stopAll('SIGTERM'));
  process.on('SIGHUP', () => void stopAll('SIGHUP'));

  try {
    say('Redis: master + replica + 3 Sentinels');
    redis = await startSentinelTopology({
      dir: path.join(HA_DIR, 'redis'),
      name: SENTINEL_NAME,
      downAfterMs: 2000,
      failoverTimeoutMs: 10_000,
      appendOnly: true,
    });
    say(`Redis: master :${redis.master.port}, replica :${redis.replica.port}, Sentinels ${redis.sentinelList}`);

    say('PostgreSQL: Patroni (etcd) primary + synchronous standby');
    postgres = await startPatroniCluster({ dir: path.join(HA_DIR, 'postgres'), nodes: 2 });
    say(`PostgreSQL: ${postgres.nodes.map((n) => `${n.name} :${n.pgPort} (Patroni :${n.restPort})`).join(', ')}`);

    const port = Number(process.env.PORT ?? 3000);
    const proxyPort = await freePort();
    const webPorts = [await freePort(), await freePort()];
    balancer = startHaproxy({
      dir: HA_DIR,
      webPort: port,
      webs: webPorts.map((p, i) => ({ name: `web${i + 1}`, port: p })),
      pgPort: proxyPort,
      postgres: postgres.nodes.map((n) => ({ name: n.name, port: n.pgPort, checkPort: n.restPort })),
      log: (l) => say(l),
    });
    balancer.once('exit', (code) => void stopAll(`haproxy exited (${code})`, 1));
    await createDatabase(proxyPort);

    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL: `postgres://postgres@127.0.0.1:${proxyPort}/faceid`,
      REDIS_URL: 'redis://127.0.0.1',
      REDIS_SENTINELS: redis.sentinelList,
      REDIS_SENTINEL_NAME: SENTINEL_NAME,
      TRUST_PROXY: 'true',
      SUPERVISOR_STATUS_FILE: path.join(HA_DIR, 'supervisor.json'),
    };
    const facePorts = [await freePort(), await freePort()];
    const searchPorts = [await freePort(), await freePort()];
    // The web processes watch the first face and search process's /health, as under `npm start`.
    env.FACE_ENGINE_PORT = String(facePorts[0]);
    env.SEARCH_HEALTH_PORT = String(searchPorts[0]);

    say('running migrations through the proxy');
    const migrate = spawnSync(process.execPath, nodeArgs('scripts/migrate.ts').concat('latest'), { cwd: ROOT, env, stdio: 'inherit' });
    if (migrate.status !== 0) throw new Error('migrations failed');

    supervisor = new Supervisor({ ...supervisorOptions(loadConfig(env)), statusFile: env.SUPERVISOR_STATUS_FILE, log: say });
    const sup = supervisor;
    webPorts.forEach((p, i) =>
      sup.add({ name: `web-${i + 1}`, command: process.execPath, args: nodeArgs('processes/web.ts'), env: { ...env, PORT: String(p) }, cwd: ROOT }),
    );
    facePorts.forEach((p, i) =>
      sup.add({
        name: `face-${i + 1}`,
        command: process.execPath,
        args: nodeArgs('processes/face.ts'),
        env: { ...env, FACE_ENGINE_PORT: String(p) },
        cwd: ROOT,
      }),
    );
    searchPorts.forEach((p, i) =>
      sup.add({
        name: `search-${i + 1}`,
        command: process.execPath,
        args: nodeArgs('processes/search.ts'),
        env: { ...env, SEARCH_HEALTH_PORT: String(p) },
        cwd: ROOT,
      }),
    );

    const r = redis;
    const pgc = postgres;
    const lb = balancer;
    const writeLayout = async () => {
      const masterPort = (await r.currentMasterPort()) ?? r.master.port;
      const dataNodes = [r.master, r.replica];
      const part = (n: { port: number; child: ChildProcess }): Part => ({
        port: n.port,
        pid: n.child.pid && isAlive(n.child.pid) && n.child.exitCode === null && n.child.signalCode === null ? n.child.pid : null,
      });
      const master = dataNodes.find((n) => n.port === masterPort) ?? r.master;
      const replica = dataNodes.find((n) => n !== master)!;
      const roles = await Promise.all(pgc.nodes.map((n) => n.role()));
      const primaryAt = roles.indexOf('primary');
      const primary = pgc.nodes[primaryAt >= 0 ? primaryAt : 0]!;
      const standby = pgc.nodes.find((n) => n !== primary)!;
      const pgPart = (n: typeof primary, role: string) => ({
        name: n.name,
        port: n.pgPort,
        pid: n.postmasterPid() ?? null,
        patroniPort: n.restPort,
        patroniPid: n.patroni.pid ?? null,
        role,
      });
      const procs = (prefix: string, ports: number[]) => ports.map((p, i) => ({ name: `${prefix}-${i + 1}`, port: p, pid: sup.pid(`${prefix}-${i + 1}`) }));
      const layout = {
        updatedAt: new Date().toISOString(),
        supervisorPid: process.pid,
        url: `http://127.0.0.1:${port}`,
        env: { DATABASE_URL: env.DATABASE_URL, REDIS_URL: env.REDIS_URL, REDIS_SENTINELS: env.REDIS_SENTINELS, REDIS_SENTINEL_NAME: env.REDIS_SENTINEL_NAME },
        balancer: { port, pid: lb.pid ?? null },
        web: procs('web', webPorts),
        face: procs('face', facePorts),
        search: procs('search', searchPorts),
        redis: { name: SENTINEL_NAME, master: part(master), replica: part(replica), sentinels: r.sentinels.map(part) },
        postgres: {
          primary: pgPart(primary, roles[pgc.nodes.indexOf(primary)]!),
          standby: pgPart(standby, roles[pgc.nodes.indexOf(standby)]!),
          proxy: { port: proxyPort, pid: lb.pid ?? null },
          etcd: { port: pgc.etcd.port, pid: pgc.etcd.child.pid ?? null },
        },
      };
      const tmp = `${LAYOUT_FILE}.tmp`;
      writeFileSync(tmp, JSON.stringify(layout, null, 2));
      renameSync(tmp, LAYOUT_FILE);
    };
    say(`starting ${sup.names().join(', ')}`);
    await writeLayout();
    const tick = setInterval(() => void writeLayout().catch(() => {}), 1000);
    tick.unref();

    for (let i = 0; i < 600 && !stopping; i++) {
      const ok = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1000) }).then(
        (res) => res.status === 200,
        () => false,
      );
      if (ok) {
        say(
          `ready: http://127.0.0.1:${port} (HAProxy over ${webPorts.length} web processes); layout in ${path.relative(ROOT, LAYOUT_FILE)}. Ctrl-C stops everything.`,
        );
        break;
      }
      await sleep(500);
    }
  } catch (e) {
    say(`failed: ${e instanceof Error ? e.message : String(e)}`);
    await stopAll('start-up failed', 1);
  }
  // Nothing outlives start:ha: when whoever started it is gone (re-parented), stop too.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) void stopAll(`parent ${parent} is gone`);
  }, 1000).unref();
}

void main();
