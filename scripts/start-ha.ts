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
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { config, environmentWith, type Config } from '../processes/config.js';
import { launch, type Launcher, type Layout, type LaunchPlan } from '../platform/processes/launcher.js';
import { processCopies, type ServiceProcess } from '../platform/processes/process-list.js';
import { isEntryFile } from '../platform/processes/shutdown.js';
import { freePort } from './lib/private-services.js';
import { startHaproxy } from './lib/ha/haproxy.js';
import { isAlive, startPatroniCluster } from './lib/ha/postgres-patroni.js';
import { startSentinelTopology } from './lib/ha/redis-sentinel.js';
import { canMakeHosts } from './lib/ha/hosts.js';
import { HOST_PORTS, makeHostsLayout } from './lib/ha/hosts-layout.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const HA_DIR = path.join(ROOT, 'var', 'ha');
export const LAYOUT_FILE = path.join(HA_DIR, 'layout.json');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const SENTINEL_NAME = 'faceid';
/** `--hosts`: each part on a host of its own, credentials on every link, TLS unless `--no-tls` (scripts/lib/ha/hosts-layout.ts, SPEC 13.2). */
const HOSTS = process.argv.includes('--hosts');
const TLS = HOSTS && !process.argv.includes('--no-tls');

/** The setting of the port a copy answers on: web's PORT (behind the balancer), the workers' /health port. */
const portSetting = (p: ServiceProcess) => p.healthPortEnv ?? 'PORT';

/** The layout's copies: as many of each process of the list as it has ports, each on its own. */
export function haCopies(ports: Record<string, number[]>, cfg?: Config) {
  return processCopies(
    (p) => ports[p.name]?.length ?? 0,
    (p, i) => ({ [portSetting(p)]: String(ports[p.name]![i]), ...(cfg ? p.copyEnv?.(cfg, i) : {}) }),
  );
}

/**
 * Search copies: two replicas of the index, or with SEARCH_SHARDS > 1 two of every shard (copy i
 * holds shard i mod N, so the two replicas of a shard are copies s and s + N: different hosts).
 */
export const haSearchCopies = (cfg: Config): number => 2 * Math.max(1, cfg.search.shards);

/** A TCP relay from `host:port` to `toHost:toPort` (each connection piped both ways; a failure on one side ends the other). */
function relayTo(host: string, port: number, toHost: string, toPort: number): Promise<net.Server> {
  const server = net.createServer((client) => {
    const upstream = net.connect(toPort, toHost);
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
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
async function waitForPrimaryOnly(adminUrl: string): Promise<void> {
  await sleep(2500);
  let inARow = 0;
  for (let i = 0; i < 300 && inARow < 10; i++) {
    const c = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 1000 });
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

/**
 * Creates the database. With `roles` (under `--hosts`): the owner `faceid_owner` (migrations) and
 * `faceid_app`, the least-privilege role the processes log in as (its grants come from the migrations),
 * both with scram-sha-256 passwords; the database belongs to the owner.
 */
async function createDatabase(adminUrl: string, roles?: { owner: string; app: string }): Promise<void> {
  await waitForPrimaryOnly(adminUrl);
  for (let i = 0; i < 100; i++) {
    const c = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 1000 });
    try {
      await c.connect();
      if (roles) {
        const role = async (name: string, password: string) => {
          const found = await c.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [name]);
          // The password is sent as a literal here (DDL takes no parameters); never logged.
          const pw = `'${password.replace(/'/g, "''")}'`;
          await c.query(found.rowCount ? `ALTER ROLE ${name} LOGIN PASSWORD ${pw}` : `CREATE ROLE ${name} LOGIN PASSWORD ${pw}`);
        };
        await role('faceid_owner', roles.owner);
        await role('faceid_app', roles.app);
      } else {
        // One machine, trust on loopback: no password to hold, but the processes still log in as a
        // member of the least-privilege role (its grants come from the migrations), never as the
        // superuser the migrations use.
        await c.query(`DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'faceid_app') THEN CREATE ROLE faceid_app NOLOGIN; END IF; END $$`);
        await c.query(
          `DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'faceid_web') THEN CREATE ROLE faceid_web LOGIN IN ROLE faceid_app; END IF; END $$`,
        );
      }
      const exists = await c.query("SELECT 1 FROM pg_database WHERE datname = 'faceid'");
      if (!exists.rowCount) await c.query(roles ? 'CREATE DATABASE faceid OWNER faceid_owner' : 'CREATE DATABASE faceid');
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
      let h: ReturnType<typeof makeHostsLayout> | undefined;
      if (HOSTS) {
        const can = canMakeHosts();
        if (!can.ok) throw new Error(`--hosts: ${can.why}`);
        const made = makeHostsLayout(HA_DIR, { tls: TLS, tag: 'a', subnetIndex: 0, searchHosts: haSearchCopies(config()) });
        h = made;
        l.onStop('the hosts', () => made.remove());
        l.say(`hosts: ${made.network.hosts.size} network namespaces on ${made.network.subnet}; credentials in var/ha/secrets; TLS ${TLS ? 'on' : 'off'}`);
      }

      l.say('Redis: master + replica + 3 Sentinels');
      const redis = await startSentinelTopology({
        dir: path.join(HA_DIR, 'redis'),
        name: SENTINEL_NAME,
        downAfterMs: 2000,
        failoverTimeoutMs: 10_000,
        appendOnly: true,
        ...(h
          ? {
              placement: {
                master: h.place('redis-master', HOST_PORTS.redisMaster),
                replica: h.place('redis-replica', HOST_PORTS.redisReplica),
                sentinels: [1, 2, 3].map((i) => h!.place(`sentinel-${i}`, HOST_PORTS.sentinel + i - 1)),
              },
              password: h.secrets.get('redis'),
              tls: h.redisTls,
            }
          : {}),
      });
      l.onStop('Redis', () => redis.stop());
      l.say(`Redis: master :${redis.master.port}, replica :${redis.replica.port}, Sentinels ${redis.sentinelList}`);
      if (l.stopping) throw new Error('stopped while starting');

      l.say('PostgreSQL: Patroni (etcd) primary + synchronous standby');
      const postgres = await startPatroniCluster({
        dir: path.join(HA_DIR, 'postgres'),
        nodes: 2,
        ...(h
          ? {
              placement: {
                etcd: [1, 2, 3].map((i) => h!.place(`etcd-${i}`, HOST_PORTS.etcd)),
                nodes: [h.place('pg1', HOST_PORTS.postgres), h.place('pg2', HOST_PORTS.postgres)],
              },
              auth: {
                superuser: h.secrets.get('postgres-superuser'),
                replication: h.secrets.get('postgres-replication'),
                rest: h.secrets.get('patroni-rest'),
                etcdRoot: h.secrets.get('etcd-root'),
                etcdPatroni: h.secrets.get('etcd-patroni'),
                clientSubnet: h.network.subnet,
              },
              tls: h.pgTls,
            }
          : {}),
      });
      l.onStop('PostgreSQL', () => postgres.stop());
      l.say(`PostgreSQL: ${postgres.nodes.map((n) => `${n.name} :${n.pgPort} (Patroni :${n.restPort})`).join(', ')}`);
      if (l.stopping) throw new Error('stopped while starting');

      const port = config().http.port;
      const proxyPort = h ? HOST_PORTS.postgresProxy : await freePort();
      const ports: Record<string, number[]> = h
        ? {
            web: [HOST_PORTS.web, HOST_PORTS.web],
            face: [HOST_PORTS.face, HOST_PORTS.face],
            search: Array.from({ length: haSearchCopies(config()) }, () => HOST_PORTS.search),
          }
        : {
            web: [await freePort(), await freePort()],
            face: [await freePort(), await freePort()],
            search: await Promise.all(Array.from({ length: haSearchCopies(config()) }, () => freePort())),
          };
      /** Under `--hosts`: the host of copy `index` (0-based) of a process (`web-1`, `face-2`...). */
      const hostOf = (name: string, index: number) => h?.network.host(`${name}-${index + 1}`);
      const webBackends = ports.web!.map((p, i) => ({ name: `web${i + 1}`, host: hostOf('web', i)?.address, port: p }));
      const pgBackends = postgres.nodes.map((n) => ({
        name: n.name,
        host: n.host,
        port: n.pgPort,
        checkPort: n.restPort,
        checkCaFile: h?.pgTls?.caFile,
        checkName: h && n.name,
      }));
      const haproxyLog = (line: string) => l.say(line);
      // One machine: one HAProxy for both roles. Across hosts: the balancer and the PostgreSQL proxy
      // each on a host of its own (a machine of the layout is lost with whatever runs on it).
      const [balancer, pgProxy] = h
        ? [
            startHaproxy({
              dir: HA_DIR,
              file: 'haproxy-web.cfg',
              only: 'web',
              webPort: port,
              webBind: h.balancer.address,
              webs: webBackends,
              pgPort: proxyPort,
              postgres: [],
              wrap: (command, args) => h!.network.inHost('balancer', command, args),
              log: haproxyLog,
            }),
            startHaproxy({
              dir: HA_DIR,
              file: 'haproxy-postgres.cfg',
              only: 'postgres',
              webPort: port,
              webs: [],
              pgPort: proxyPort,
              pgBind: h.pgProxy.address,
              postgres: pgBackends,
              wrap: (command, args) => h!.network.inHost('pg-proxy', command, args),
              log: haproxyLog,
            }),
          ]
        : (() => {
            const one = startHaproxy({ dir: HA_DIR, webPort: port, webs: webBackends, pgPort: proxyPort, postgres: pgBackends, log: haproxyLog });
            return [one, one];
          })();
      const proxies: [string, ChildProcess][] = [['the balancer', balancer]];
      if (pgProxy !== balancer) proxies.push(['the PostgreSQL proxy', pgProxy]);
      for (const [what, proxy] of proxies) {
        l.onStop(what, () => void proxy.kill('SIGTERM'));
        proxy.once('exit', (code) => void l.stop(`haproxy (${what}) exited (${code})`, 1));
      }
      // The service answers on PORT of the machine too (SPEC 13.2): a plain TCP relay from the machine's
      // loopback to the balancer's host, in this process (no balancing here: HAProxy does that).
      if (h) {
        const relay = await relayTo('127.0.0.1', port, h.balancer.address, port);
        l.onStop('the relay to the balancer', () => void relay.close());
        l.say(
          `hosts: balancer (HAProxy) on ${h.balancer.address}:${port} (netns ${h.balancer.netns}), PostgreSQL proxy (HAProxy) on ${h.pgProxy.address}:${proxyPort} ` +
            `(netns ${h.pgProxy.netns}); the machine's 127.0.0.1:${port} relays to the balancer`,
        );
      }
      await createDatabase(
        h ? h.pgUrl('postgres', h.secrets.get('postgres-superuser'), 'postgres') : `postgres://postgres@127.0.0.1:${proxyPort}/postgres`,
        h && { owner: h.secrets.get('postgres-owner'), app: h.secrets.get('postgres-app') },
      );

      const env = environmentWith({
        DATABASE_URL: h ? h.pgUrl('faceid_app', h.secrets.get('postgres-app'), 'faceid') : `postgres://faceid_web@127.0.0.1:${proxyPort}/faceid`,
        REDIS_URL: h ? h.redisUrl() : 'redis://127.0.0.1',
        ...(h
          ? {
              // The layout's CA, for rediss:// (ioredis verifies against Node's store).
              ...(h.certs ? { NODE_EXTRA_CA_CERTS: h.certs.caFile } : {}),
              FACE_ENGINE_URL: `http://${hostOf('face', 0)!.address}:${HOST_PORTS.face}`,
              SEARCH_HEALTH_URL: `http://${hostOf('search', 0)!.address}:${HOST_PORTS.search}`,
            }
          : {}),
        REDIS_SENTINELS: redis.sentinelList,
        REDIS_SENTINEL_NAME: SENTINEL_NAME,
        TRUST_PROXY: 'true',
        SUPERVISOR_STATUS_FILE: path.join(HA_DIR, 'supervisor.json'),
        // The web processes watch the first face and search process's /health, as under `npm start`.
        FACE_ENGINE_PORT: String(ports.face![0]),
        SEARCH_HEALTH_PORT: String(ports.search![0]),
      });
      // On a host of its own a copy listens on its host's address, and reaches the registry simulator
      // (in the web process) on a web host's address, not on a loopback nothing else shares.
      const copies = haCopies(ports, config()).map((c) => {
        const host = hostOf(c.process.name, c.index);
        if (!h || !host) return c;
        const web = hostOf('web', c.process.name === 'web' ? c.index : 0)!;
        return { ...c, env: { ...c.env, HOST: host.address, REGISTRY_URL: `http://${web.address}:${HOST_PORTS.web}/api` } };
      });
      const commandOf = h
        ? (copy: { process: { name: string }; index: number }, command: string, args: string[]) =>
            h!.network.inHost(`${copy.process.name}-${copy.index + 1}`, command, args)
        : undefined;
      // Across hosts the balancer's own address (what a client on the network uses); 127.0.0.1:PORT relays to it.
      const url = h ? `http://${h.balancer.address}:${port}` : `http://127.0.0.1:${port}`;

      const writeLayout = async () => {
        const masterPort = (await redis.currentMasterPort()) ?? redis.master.port;
        const dataNodes = [redis.master, redis.replica];
        /** Under `--hosts`: the part's host (its address), namespace and link. */
        const where = (name: string) => {
          const x = h?.network.hosts.get(name);
          return x ? { host: x.address, netns: x.netns, link: x.link } : {};
        };
        const redisPart = (n: { port: number }) =>
          n.port === redis.master.port
            ? 'redis-master'
            : n.port === redis.replica.port
              ? 'redis-replica'
              : `sentinel-${redis.sentinels.findIndex((x) => x.port === n.port) + 1}`;
        const part = (n: { port: number; child: ChildProcess }): Part => ({
          ...where(redisPart(n)),
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
          ...where(n.name),
          restPort: n.restPort,
          restUrl: n.restUrl,
          port: n.pgPort,
          pid: n.postmasterPid() ?? null,
          patroniPort: n.restPort,
          patroniPid: n.patroni.pid ?? null,
          role,
        });
        const procs = (name: string) =>
          copies
            .filter((c) => c.process.name === name)
            .map((c) => ({
              name: c.name,
              ...where(`${name}-${c.index + 1}`),
              port: ports[name]![c.index]!,
              pid: l.pid(c.name),
              // Which shard a search part holds (0 with one shard: the whole gallery).
              ...(name === 'search' ? { shard: Number(c.env.SEARCH_SHARD ?? 0) } : {}),
            }));
        const layout = {
          updatedAt: new Date().toISOString(),
          supervisorPid: process.pid,
          url,
          // No secret here: under `--hosts` the URLs are given without their passwords (var/ha/secrets has them).
          env: h
            ? {
                DATABASE_URL: h.pgUrlShown('faceid_app', 'faceid'),
                REDIS_URL: `${h.tls ? 'rediss' : 'redis'}://redis`,
                REDIS_SENTINELS: env.REDIS_SENTINELS,
                REDIS_SENTINEL_NAME: env.REDIS_SENTINEL_NAME,
              }
            : { DATABASE_URL: env.DATABASE_URL, REDIS_URL: env.REDIS_URL, REDIS_SENTINELS: env.REDIS_SENTINELS, REDIS_SENTINEL_NAME: env.REDIS_SENTINEL_NAME },
          ...(h
            ? {
                hosts: {
                  subnet: h.network.subnet,
                  bridge: h.network.bridge,
                  machine: h.network.gateway,
                  secretsDir: path.relative(ROOT, h.secrets.dir),
                  tls: h.tls,
                  caFile: h.certs ? path.relative(ROOT, h.certs.caFile) : null,
                },
              }
            : {}),
          balancer: { ...where('balancer'), port, pid: balancer.pid ?? null },
          web: procs('web'),
          face: procs('face'),
          search: procs('search'),
          redis: { name: SENTINEL_NAME, master: part(master), replica: part(replica), sentinels: redis.sentinels.map(part) },
          postgres: {
            primary: pgPart(primary, roles[postgres.nodes.indexOf(primary)]!),
            standby: pgPart(standby, roles[postgres.nodes.indexOf(standby)]!),
            proxy: { ...where('pg-proxy'), port: proxyPort, pid: pgProxy.pid ?? null },
            etcd: { port: postgres.etcd.port, pid: postgres.etcd.child.pid ?? null },
          },
          etcd: postgres.etcdMembers.map((e) => ({ name: e.name, ...where(e.name), port: e.port, peerPort: e.peerPort, url: e.url, pid: e.child.pid ?? null })),
        };
        const tmp = `${LAYOUT_FILE}.tmp`;
        writeFileSync(tmp, JSON.stringify(layout, null, 2));
        renameSync(tmp, LAYOUT_FILE);
      };
      l.onStop('the layout file', () => rmSync(LAYOUT_FILE, { force: true }));
      writeLayoutFile = writeLayout;
      l.say(`layout in ${path.relative(ROOT, LAYOUT_FILE)}: HAProxy on ${url} over ${ports.web!.length} web processes`);
      if (h) for (const [name, x] of h.network.hosts) l.say(`host ${name}: ${x.address} (netns ${x.netns})`);
      // The owner's credentials go to the migrations only; the processes hold faceid_app's.
      const releaseEnv = {
        MIGRATION_DATABASE_URL: h ? h.pgUrl('faceid_owner', h.secrets.get('postgres-owner'), 'faceid') : `postgres://postgres@127.0.0.1:${proxyPort}/faceid`,
      };
      return { env, copies, url, releaseEnv, ...(commandOf ? { commandOf } : {}) };
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
