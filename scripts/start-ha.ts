/**
 * `npm run start:ha`: the high-availability layout on loopback, from Debian packages and this project
 * alone (docs/deployment.md gives the same parts on separate machines):
 *   - Redis master + replica + 3 Sentinels (scripts/lib/ha/redis-sentinel.ts); every connection of
 *     every process goes through the Sentinels (REDIS_SENTINELS, REDIS_SENTINEL_NAME);
 *   - PostgreSQL primary + synchronous streaming standby under Patroni with etcd, automatic failover
 *     (scripts/lib/ha/postgres-patroni.ts), and HAProxy in front giving one address (DATABASE_URL);
 *   - 2 web processes behind HAProxy answering on PORT (default 3000), 2 face and 2 search processes
 *     (the list: platform/processes/process-list.ts), each on a port of its own.
 * Launching, supervision and stopping are the launcher's (platform/processes/launcher.ts), as for
 * `npm start`: this file is the layout alone. A stop (SIGINT, SIGTERM, SIGHUP, to this process or its
 * process group) gives web its whole drain, restarts nothing, and stops the balancer, PostgreSQL and
 * Redis once every process is gone.
 * Writes var/ha/layout.json (every part's port and pid, rewritten as roles and pids change: after a
 * failover `redis.master` and `postgres.primary` name the promoted node). Ctrl-C stops everything.
 * The data of a run lives in var/ha and is wiped at the next start.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { config, environmentWith } from '../platform/config.js';
import { launch, type Launcher, type Layout, type LaunchPlan } from '../platform/processes/launcher.js';
import { processCopies, type ServiceProcess } from '../platform/processes/process-list.js';
import { isEntryFile } from '../platform/processes/shutdown.js';
import { freePort } from './lib/private-services.js';
import { startHaproxy } from './lib/ha/haproxy.js';
import { isAlive, startPatroniCluster } from './lib/ha/postgres-patroni.js';
import { startSentinelTopology } from './lib/ha/redis-sentinel.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const HA_DIR = path.join(ROOT, 'var', 'ha');
export const LAYOUT_FILE = path.join(HA_DIR, 'layout.json');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const SENTINEL_NAME = 'faceid';

/** The setting of the port a copy answers on: web's PORT (behind the balancer), the workers' /health port. */
const portSetting = (p: ServiceProcess) => p.healthPortEnv ?? 'PORT';

/** The layout's copies: as many of each process of the list as it has ports, each on its own. */
export function haCopies(ports: Record<string, number[]>) {
  return processCopies(
    (p) => ports[p.name]?.length ?? 0,
    (p, i) => ({ [portSetting(p)]: String(ports[p.name]![i]) }),
  );
}

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

export function haLayout(): Layout {
  /** Writes var/ha/layout.json (every part's port and pid); set once the layout is prepared. */
  let writeLayoutFile: (() => Promise<void>) | undefined;
  return {
    name: 'start:ha',
    async prepare(l: Launcher): Promise<LaunchPlan> {
      const tools = spawnSync('bash', [path.join(ROOT, 'scripts', 'ensure-ha-tools.sh')], { stdio: 'inherit' });
      if (tools.status !== 0) throw new Error('the Debian packages of the layout are missing (scripts/ensure-ha-tools.sh)');
      rmSync(HA_DIR, { recursive: true, force: true });
      mkdirSync(HA_DIR, { recursive: true });

      l.say('Redis: master + replica + 3 Sentinels');
      const redis = await startSentinelTopology({
        dir: path.join(HA_DIR, 'redis'),
        name: SENTINEL_NAME,
        downAfterMs: 2000,
        failoverTimeoutMs: 10_000,
        appendOnly: true,
      });
      l.onStop('Redis', () => redis.stop());
      l.say(`Redis: master :${redis.master.port}, replica :${redis.replica.port}, Sentinels ${redis.sentinelList}`);
      if (l.stopping) throw new Error('stopped while starting');

      l.say('PostgreSQL: Patroni (etcd) primary + synchronous standby');
      const postgres = await startPatroniCluster({ dir: path.join(HA_DIR, 'postgres'), nodes: 2 });
      l.onStop('PostgreSQL', () => postgres.stop());
      l.say(`PostgreSQL: ${postgres.nodes.map((n) => `${n.name} :${n.pgPort} (Patroni :${n.restPort})`).join(', ')}`);
      if (l.stopping) throw new Error('stopped while starting');

      const port = config().http.port;
      const proxyPort = await freePort();
      const ports: Record<string, number[]> = {
        web: [await freePort(), await freePort()],
        face: [await freePort(), await freePort()],
        search: [await freePort(), await freePort()],
      };
      const balancer = startHaproxy({
        dir: HA_DIR,
        webPort: port,
        webs: ports.web!.map((p, i) => ({ name: `web${i + 1}`, port: p })),
        pgPort: proxyPort,
        postgres: postgres.nodes.map((n) => ({ name: n.name, port: n.pgPort, checkPort: n.restPort })),
        log: (line) => l.say(line),
      });
      l.onStop('the balancer', () => void balancer.kill('SIGTERM'));
      balancer.once('exit', (code) => void l.stop(`haproxy exited (${code})`, 1));
      await createDatabase(proxyPort);

      const env = environmentWith({
        DATABASE_URL: `postgres://postgres@127.0.0.1:${proxyPort}/faceid`,
        REDIS_URL: 'redis://127.0.0.1',
        REDIS_SENTINELS: redis.sentinelList,
        REDIS_SENTINEL_NAME: SENTINEL_NAME,
        TRUST_PROXY: 'true',
        SUPERVISOR_STATUS_FILE: path.join(HA_DIR, 'supervisor.json'),
        // The web processes watch the first face and search process's /health, as under `npm start`.
        FACE_ENGINE_PORT: String(ports.face![0]),
        SEARCH_HEALTH_PORT: String(ports.search![0]),
      });
      const copies = haCopies(ports);
      const url = `http://127.0.0.1:${port}`;

      const writeLayout = async () => {
        const masterPort = (await redis.currentMasterPort()) ?? redis.master.port;
        const dataNodes = [redis.master, redis.replica];
        const part = (n: { port: number; child: ChildProcess }): Part => ({
          port: n.port,
          pid: n.child.pid && isAlive(n.child.pid) && n.child.exitCode === null && n.child.signalCode === null ? n.child.pid : null,
        });
        const master = dataNodes.find((n) => n.port === masterPort) ?? redis.master;
        const replica = dataNodes.find((n) => n !== master)!;
        const roles = await Promise.all(postgres.nodes.map((n) => n.role()));
        const primaryAt = roles.indexOf('primary');
        const primary = postgres.nodes[primaryAt >= 0 ? primaryAt : 0]!;
        const standby = postgres.nodes.find((n) => n !== primary)!;
        const pgPart = (n: typeof primary, role: string) => ({
          name: n.name,
          port: n.pgPort,
          pid: n.postmasterPid() ?? null,
          patroniPort: n.restPort,
          patroniPid: n.patroni.pid ?? null,
          role,
        });
        const procs = (name: string) =>
          copies.filter((c) => c.process.name === name).map((c) => ({ name: c.name, port: ports[name]![c.index]!, pid: l.pid(c.name) }));
        const layout = {
          updatedAt: new Date().toISOString(),
          supervisorPid: process.pid,
          url,
          env: { DATABASE_URL: env.DATABASE_URL, REDIS_URL: env.REDIS_URL, REDIS_SENTINELS: env.REDIS_SENTINELS, REDIS_SENTINEL_NAME: env.REDIS_SENTINEL_NAME },
          balancer: { port, pid: balancer.pid ?? null },
          web: procs('web'),
          face: procs('face'),
          search: procs('search'),
          redis: { name: SENTINEL_NAME, master: part(master), replica: part(replica), sentinels: redis.sentinels.map(part) },
          postgres: {
            primary: pgPart(primary, roles[postgres.nodes.indexOf(primary)]!),
            standby: pgPart(standby, roles[postgres.nodes.indexOf(standby)]!),
            proxy: { port: proxyPort, pid: balancer.pid ?? null },
            etcd: { port: postgres.etcd.port, pid: postgres.etcd.child.pid ?? null },
          },
        };
        const tmp = `${LAYOUT_FILE}.tmp`;
        writeFileSync(tmp, JSON.stringify(layout, null, 2));
        renameSync(tmp, LAYOUT_FILE);
      };
      l.onStop('the layout file', () => rmSync(LAYOUT_FILE, { force: true }));
      writeLayoutFile = writeLayout;
      l.say(`layout in ${path.relative(ROOT, LAYOUT_FILE)}: HAProxy on ${url} over ${ports.web!.length} web processes`);
      return { env, copies, url };
    },
    async started() {
      const write = writeLayoutFile;
      if (!write) return;
      await write();
      setInterval(() => void write().catch(() => {}), 1000).unref();
    },
  };
}

if (isEntryFile(import.meta.url)) launch(haLayout(), ROOT);
