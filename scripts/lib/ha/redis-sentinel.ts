/**
 * A Redis master, one replica and three Sentinels, from Debian's redis-server (`redis-server
 * --sentinel` is the Sentinel), on loopback ports. Used by `npm run start:ha` (scripts/start-ha.ts)
 * and by test/redis-sentinel-failover.test.ts; docs/deployment.md gives the same settings for
 * separate machines.
 *
 * The data nodes run with the settings BullMQ documents for production: `maxmemory-policy
 * noeviction` (an evicted job key breaks a queue) and AOF with `appendfsync everysec`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../private-services.js';
import { privateDir, writePrivate } from './secrets.js';

export interface RedisNode {
  role: 'master' | 'replica' | 'sentinel';
  /** Its address (127.0.0.1, or its host's address under `--hosts`). */
  host: string;
  port: number;
  child: ChildProcess;
}

/** Where a node runs: its address, and how its command is run there (inside a host's namespace). */
export interface Placement {
  address: string;
  /** Wraps the command line to run it on that host (`ip netns exec ...`). */
  wrap?: (command: string, args: string[]) => [string, string[]];
  /** A fixed port (a host of its own has every port free); else a free loopback port. */
  port?: number;
}

/** TLS for every link (clients, replication, Sentinels): `tls-port`, no plain port. */
export interface RedisTls {
  certFile: string;
  keyFile: string;
  caFile: string;
}

export interface SentinelTopology {
  name: string;
  master: RedisNode;
  replica: RedisNode;
  sentinels: RedisNode[];
  /** `host:port,...` for REDIS_SENTINELS. */
  sentinelList: string;
  /** The port of the master the Sentinels name now (every node has a port of its own, on any host). */
  currentMasterPort(): Promise<number | undefined>;
  /** The address of the master the Sentinels name now. */
  currentMaster(): Promise<{ host: string; port: number } | undefined>;
  /** Asks a Sentinel for a failover now (the master stays up and becomes a replica). */
  failover(): Promise<void>;
  /** Waits until the Sentinels name a master other than `oldPort` and it answers as a master. */
  waitForNewMaster(oldPort: number, timeoutMs: number): Promise<number>;
  stop(): Promise<void>;
}

export interface SentinelOptions {
  dir: string;
  name?: string;
  /** Sentinel's `down-after-milliseconds`: how long a silent master is tolerated. */
  downAfterMs?: number;
  failoverTimeoutMs?: number;
  /** AOF on (the production setting); tests turn it off to spare the disk. */
  appendOnly?: boolean;
  log?: (line: string) => void;
  /** master, replica, then the three Sentinels (default: loopback, free ports). */
  placement?: { master: Placement; replica: Placement; sentinels: Placement[] };
  /** `requirepass`/`masterauth` on the data nodes, `requirepass`/`auth-pass`/`sentinel-pass` on the Sentinels. */
  password?: string;
  tls?: RedisTls;
  /**
   * `min-replicas-to-write` (with `min-replicas-max-lag` 5 s): a master that has lost its replicas for
   * that long (cut off from them) refuses writes, which would otherwise be lost when it rejoins as a
   * replica of the master promoted meanwhile.
   */
  minReplicasToWrite?: number;
}

/** How a client of the layout reaches a node (password, TLS). */
export interface RedisAccess {
  password?: string;
  tls?: RedisTls;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function listenArgs(host: string, port: number, tls: RedisTls | undefined): string[] {
  return tls
    ? [
        '--port',
        '0',
        '--tls-port',
        String(port),
        '--tls-cert-file',
        tls.certFile,
        '--tls-key-file',
        tls.keyFile,
        '--tls-ca-cert-file',
        tls.caFile,
        '--tls-auth-clients',
        'no',
      ]
    : ['--port', String(port)];
}

function dataNodeArgs(host: string, port: number, dir: string, appendOnly: boolean, opts: SentinelOptions): string[] {
  return [
    ...listenArgs(host, port, opts.tls),
    '--bind',
    host,
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    appendOnly ? 'yes' : 'no',
    '--appendfsync',
    'everysec',
    '--maxmemory-policy',
    'noeviction',
    // Over loopback a fresh replica syncs without a disk round trip.
    '--repl-diskless-sync',
    'yes',
    '--repl-diskless-sync-delay',
    '0',
    '--daemonize',
    'no',
    '--logfile',
    path.join(dir, 'redis.log'),
    ...(opts.tls ? ['--tls-replication', 'yes'] : []),
    ...(opts.minReplicasToWrite ? ['--min-replicas-to-write', String(opts.minReplicasToWrite), '--min-replicas-max-lag', '5'] : []),
  ];
}

/** The data nodes' passwords in a configuration file (0600), not on a command line anyone can read in /proc. */
function passwordFile(dir: string, password: string | undefined): string[] {
  if (!password) return [];
  const file = path.join(dir, 'auth.conf');
  writePrivate(file, `requirepass ${password}\nmasterauth ${password}\n`);
  return [file];
}

async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await sleep(50);
  }
  throw new Error(`${what}: not ready after ${timeoutMs} ms`);
}

export async function withClient<T>(node: { host: string; port: number }, fn: (r: Redis) => Promise<T>, access: RedisAccess = {}): Promise<T | undefined> {
  const r = new Redis({
    host: node.host,
    port: node.port,
    password: access.password,
    ...(access.tls ? { tls: { ca: readFileSync(access.tls.caFile) } } : {}),
    lazyConnect: true,
    connectTimeout: 500,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  r.on('error', () => {});
  try {
    await r.connect();
    return await fn(r);
  } catch {
    return undefined;
  } finally {
    r.disconnect();
  }
}

export async function startSentinelTopology(opts: SentinelOptions): Promise<SentinelTopology> {
  const name = opts.name ?? 'faceid';
  const downAfterMs = opts.downAfterMs ?? 1000;
  const failoverTimeoutMs = opts.failoverTimeoutMs ?? 5000;
  const appendOnly = opts.appendOnly ?? true;
  const children: ChildProcess[] = [];
  const access: RedisAccess = { password: opts.password, tls: opts.tls };
  const launch = (args: string[], label: string, where?: Placement) => {
    // umask 077: the files Redis writes itself (a Sentinel rewrites its configuration, which holds the
    // passwords; the AOF) are its own alone.
    const inShell: [string, string[]] = ['sh', ['-c', 'umask 077 && exec "$0" "$@"', 'redis-server', ...args]];
    const [command, argv] = where?.wrap ? where.wrap(...inShell) : inShell;
    const child = spawn(command, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr?.on('data', (d: Buffer) => opts.log?.(`${label}: ${d.toString().trim()}`));
    children.push(child);
    return child;
  };
  const stop = async () => {
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            c.once('exit', () => resolve());
            c.kill('SIGKILL');
          }),
      ),
    );
  };
  try {
    const at = (p: Placement | undefined) => ({ host: p?.address ?? '127.0.0.1', port: p?.port });
    const m = at(opts.placement?.master);
    const rp = at(opts.placement?.replica);
    const masterPort = m.port ?? (await freePort());
    const replicaPort = rp.port ?? (await freePort());
    const masterDir = privateDir(path.join(opts.dir, `redis-${m.host}-${masterPort}`));
    const replicaDir = privateDir(path.join(opts.dir, `redis-${rp.host}-${replicaPort}`));
    const master: RedisNode = {
      role: 'master',
      host: m.host,
      port: masterPort,
      child: launch(
        [...passwordFile(masterDir, opts.password), ...dataNodeArgs(m.host, masterPort, masterDir, appendOnly, opts)],
        'redis master',
        opts.placement?.master,
      ),
    };
    await waitUntil('redis master', async () => (await withClient(master, (r) => r.ping(), access)) === 'PONG', 10_000);
    const replica: RedisNode = {
      role: 'replica',
      host: rp.host,
      port: replicaPort,
      child: launch(
        [
          ...passwordFile(replicaDir, opts.password),
          ...dataNodeArgs(rp.host, replicaPort, replicaDir, appendOnly, opts),
          '--replicaof',
          m.host,
          String(masterPort),
        ],
        'redis replica',
        opts.placement?.replica,
      ),
    };
    await waitUntil(
      'redis replica in sync',
      async () => {
        const info = await withClient(replica, (r) => r.info('replication'), access);
        return !!info && /master_link_status:up/.test(info);
      },
      15_000,
    );

    const sentinels: RedisNode[] = [];
    for (let i = 0; i < 3; i++) {
      const where = opts.placement?.sentinels[i];
      const host = where?.address ?? '127.0.0.1';
      const port = where?.port ?? (await freePort());
      const dir = privateDir(path.join(opts.dir, `sentinel-${host}-${port}`));
      // Sentinel rewrites its configuration file (it records what it learns): one file each, 0600 (it
      // holds the passwords).
      const file = path.join(dir, 'sentinel.conf');
      const tls = opts.tls;
      writePrivate(
        file,
        [
          ...(tls
            ? [
                'port 0',
                `tls-port ${port}`,
                `tls-cert-file ${tls.certFile}`,
                `tls-key-file ${tls.keyFile}`,
                `tls-ca-cert-file ${tls.caFile}`,
                'tls-auth-clients no',
                'tls-replication yes',
              ]
            : [`port ${port}`]),
          `bind ${host}`,
          `dir ${dir}`,
          `logfile ${path.join(dir, 'sentinel.log')}`,
          `sentinel monitor ${name} ${master.host} ${masterPort} 2`,
          `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
          `sentinel failover-timeout ${name} ${failoverTimeoutMs}`,
          `sentinel parallel-syncs ${name} 1`,
          ...(opts.password ? [`sentinel auth-pass ${name} ${opts.password}`, `requirepass ${opts.password}`, `sentinel sentinel-pass ${opts.password}`] : []),
          '',
        ].join('\n'),
      );
      sentinels.push({ role: 'sentinel', host, port, child: launch([file, '--sentinel'], `sentinel ${host}:${port}`, where) });
    }
    const askSentinels = async (): Promise<{ host: string; port: number } | undefined> => {
      for (const s of sentinels) {
        const addr = await withClient(s, (r) => r.call('SENTINEL', 'get-master-addr-by-name', name) as Promise<[string, string] | null>, access);
        if (addr) return { host: addr[0], port: Number(addr[1]) };
      }
      return undefined;
    };
    // Ready when every Sentinel knows the replica and the other Sentinels (a failover needs a quorum).
    await waitUntil(
      'sentinels',
      async () => {
        for (const s of sentinels) {
          const m = await withClient(s, (r) => r.call('SENTINEL', 'master', name) as Promise<string[]>, access);
          if (!m) return false;
          const field = (k: string) => Number(m[m.indexOf(k) + 1]);
          if (field('num-slaves') < 1 || field('num-other-sentinels') < 2) return false;
        }
        return true;
      },
      20_000,
    );

    return {
      name,
      master,
      replica,
      sentinels,
      sentinelList: sentinels.map((s) => `${s.host}:${s.port}`).join(','),
      currentMasterPort: async () => (await askSentinels())?.port,
      currentMaster: askSentinels,
      failover: async () => {
        const ok = await withClient(sentinels[0]!, (r) => r.call('SENTINEL', 'failover', name), access);
        if (ok !== 'OK') throw new Error(`SENTINEL FAILOVER ${name} did not answer OK`);
      },
      waitForNewMaster: async (oldPort, timeoutMs) => {
        let port: number | undefined;
        await waitUntil(
          'new redis master',
          async () => {
            const addr = await askSentinels();
            port = addr?.port;
            if (!addr || port === oldPort) return false;
            const role = await withClient(addr, (r) => r.call('ROLE') as Promise<unknown[]>, access);
            return role?.[0] === 'master';
          },
          timeoutMs,
        );
        return port!;
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
