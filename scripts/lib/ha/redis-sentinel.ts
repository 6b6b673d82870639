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
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { freePort, redisAnswers } from '../private-services.js';

export interface RedisNode {
  role: 'master' | 'replica' | 'sentinel';
  port: number;
  child: ChildProcess;
}

export interface SentinelTopology {
  name: string;
  master: RedisNode;
  replica: RedisNode;
  sentinels: RedisNode[];
  /** `host:port,...` for REDIS_SENTINELS. */
  sentinelList: string;
  /** The port of the master the Sentinels name now. */
  currentMasterPort(): Promise<number | undefined>;
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
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function dataNodeArgs(port: number, dir: string, appendOnly: boolean): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
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
  ];
}

async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await sleep(50);
  }
  throw new Error(`${what}: not ready after ${timeoutMs} ms`);
}

async function withClient<T>(port: number, fn: (r: Redis) => Promise<T>): Promise<T | undefined> {
  const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true, connectTimeout: 500, maxRetriesPerRequest: 0, retryStrategy: () => null });
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
  const launch = (args: string[], label: string) => {
    const child = spawn('redis-server', args, { stdio: ['ignore', 'ignore', 'pipe'] });
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
    const masterPort = await freePort();
    const replicaPort = await freePort();
    const masterDir = path.join(opts.dir, `redis-${masterPort}`);
    const replicaDir = path.join(opts.dir, `redis-${replicaPort}`);
    mkdirSync(masterDir, { recursive: true });
    mkdirSync(replicaDir, { recursive: true });
    const master: RedisNode = { role: 'master', port: masterPort, child: launch(dataNodeArgs(masterPort, masterDir, appendOnly), 'redis master') };
    await waitUntil('redis master', () => redisAnswers(`redis://127.0.0.1:${masterPort}`, 300), 10_000);
    const replica: RedisNode = {
      role: 'replica',
      port: replicaPort,
      child: launch([...dataNodeArgs(replicaPort, replicaDir, appendOnly), '--replicaof', '127.0.0.1', String(masterPort)], 'redis replica'),
    };
    await waitUntil(
      'redis replica in sync',
      async () => {
        const info = await withClient(replicaPort, (r) => r.info('replication'));
        return !!info && /master_link_status:up/.test(info);
      },
      15_000,
    );

    const sentinels: RedisNode[] = [];
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const dir = path.join(opts.dir, `sentinel-${port}`);
      mkdirSync(dir, { recursive: true });
      // Sentinel rewrites its configuration file (it records what it learns): one file each.
      const file = path.join(dir, 'sentinel.conf');
      writeFileSync(
        file,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `logfile ${path.join(dir, 'sentinel.log')}`,
          `sentinel monitor ${name} 127.0.0.1 ${masterPort} 2`,
          `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
          `sentinel failover-timeout ${name} ${failoverTimeoutMs}`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      sentinels.push({ role: 'sentinel', port, child: launch([file, '--sentinel'], `sentinel ${port}`) });
    }
    const askSentinels = async (): Promise<number | undefined> => {
      for (const s of sentinels) {
        const addr = await withClient(s.port, (r) => r.call('SENTINEL', 'get-master-addr-by-name', name) as Promise<[string, string] | null>);
        if (addr) return Number(addr[1]);
      }
      return undefined;
    };
    // Ready when every Sentinel knows the replica and the other Sentinels (a failover needs a quorum).
    await waitUntil(
      'sentinels',
      async () => {
        for (const s of sentinels) {
          const m = await withClient(s.port, (r) => r.call('SENTINEL', 'master', name) as Promise<string[]>);
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
      sentinelList: sentinels.map((s) => `127.0.0.1:${s.port}`).join(','),
      currentMasterPort: askSentinels,
      failover: async () => {
        const ok = await withClient(sentinels[0]!.port, (r) => r.call('SENTINEL', 'failover', name));
        if (ok !== 'OK') throw new Error(`SENTINEL FAILOVER ${name} did not answer OK`);
      },
      waitForNewMaster: async (oldPort, timeoutMs) => {
        let port: number | undefined;
        await waitUntil(
          'new redis master',
          async () => {
            port = await askSentinels();
            if (!port || port === oldPort) return false;
            const role = await withClient(port, (r) => r.call('ROLE') as Promise<unknown[]>);
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
