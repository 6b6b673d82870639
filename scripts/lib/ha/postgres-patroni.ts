/**
 * PostgreSQL primary + synchronous streaming standby under Patroni, with etcd as Patroni's store
 * (Debian packages `patroni`, `etcd-server`, PostgreSQL 15), on loopback. Why Patroni: it exposes
 * per-node REST health (`GET /primary` answers 200 on the leader only), which HAProxy checks to send
 * the application to whichever node is primary (node-postgres cannot follow a multi-host connection
 * string: node-postgres #1470); `synchronous_mode` makes the standby confirm every commit before it is
 * answered, and only a synchronous standby may be promoted, so an answered commit survives the
 * primary's loss. pg_auto_failover (its monitor is one more PostgreSQL, no HTTP health for HAProxy)
 * and repmgr (no health endpoint, promotion scripts to write) were the alternatives (docs/deployment.md).
 *
 * PostgreSQL refuses to run as root: Patroni and the servers run as the `postgres` user (runuser).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { freePort } from '../private-services.js';

export interface PatroniNode {
  name: string;
  pgPort: number;
  restPort: number;
  dataDir: string;
  patroni: ChildProcess;
  /** The postmaster's pid (from postmaster.pid), once the server runs. */
  postmasterPid(): number | undefined;
  role(): Promise<'primary' | 'replica' | 'down'>;
}

export interface PatroniCluster {
  etcd: { port: number; child: ChildProcess };
  nodes: PatroniNode[];
  primary(): Promise<PatroniNode | undefined>;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PG_BIN = process.env.PG_BIN_DIR ?? '/usr/lib/postgresql/15/bin';

function userIds(name: string): { uid: number; gid: number } {
  const uid = Number(spawnSync('id', ['-u', name], { encoding: 'utf8' }).stdout.trim());
  const gid = Number(spawnSync('id', ['-g', name], { encoding: 'utf8' }).stdout.trim());
  return { uid, gid };
}

async function restRole(port: number): Promise<'primary' | 'replica' | 'down'> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/patroni`, { signal: AbortSignal.timeout(1000) });
    const body = (await res.json()) as { role?: string; state?: string };
    if (body.state !== 'running') return 'down';
    return body.role === 'master' || body.role === 'primary' ? 'primary' : 'replica';
  } catch {
    return 'down';
  }
}

export async function startPatroniCluster(opts: { dir: string; nodes?: number; log?: (line: string) => void }): Promise<PatroniCluster> {
  const children: ChildProcess[] = [];
  const { uid, gid } = userIds('postgres');
  const own = (p: string) => {
    mkdirSync(p, { recursive: true });
    chownSync(p, uid, gid);
  };
  own(opts.dir);
  const etcdPort = await freePort();
  const etcdPeer = await freePort();
  const etcdDir = path.join(opts.dir, 'etcd');
  own(etcdDir);
  const etcd = spawn(
    'runuser',
    [
      '-u',
      'postgres',
      '--',
      'etcd',
      '--name',
      'etcd-1',
      '--data-dir',
      path.join(etcdDir, 'data'),
      '--listen-client-urls',
      `http://127.0.0.1:${etcdPort}`,
      '--advertise-client-urls',
      `http://127.0.0.1:${etcdPort}`,
      '--listen-peer-urls',
      `http://127.0.0.1:${etcdPeer}`,
      '--initial-advertise-peer-urls',
      `http://127.0.0.1:${etcdPeer}`,
      '--initial-cluster',
      `etcd-1=http://127.0.0.1:${etcdPeer}`,
      '--enable-v2=true',
    ],
    { stdio: ['ignore', 'ignore', 'ignore'], detached: true },
  );
  children.push(etcd);
  for (let i = 0; i < 100; i++) {
    const ok = await fetch(`http://127.0.0.1:${etcdPort}/health`, { signal: AbortSignal.timeout(500) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    await sleep(100);
  }

  const nodes: PatroniNode[] = [];
  for (let i = 1; i <= (opts.nodes ?? 2); i++) {
    const name = `pg${i}`;
    const pgPort = await freePort();
    const restPort = await freePort();
    const nodeDir = path.join(opts.dir, name);
    own(nodeDir);
    const dataDir = path.join(nodeDir, 'data');
    const cfg = path.join(nodeDir, 'patroni.yml');
    // YAML written as JSON (a subset of YAML): no YAML library needed.
    writeFileSync(
      cfg,
      JSON.stringify(
        {
          scope: 'faceid',
          name,
          log: { level: 'WARNING', dir: nodeDir },
          restapi: { listen: `127.0.0.1:${restPort}`, connect_address: `127.0.0.1:${restPort}` },
          etcd3: { hosts: [`127.0.0.1:${etcdPort}`] },
          bootstrap: {
            dcs: {
              // The leader key lives 10 s: a primary gone is replaced after at most ttl + loop_wait.
              ttl: 10,
              loop_wait: 2,
              retry_timeout: 3,
              maximum_lag_on_failover: 1048576,
              synchronous_mode: true,
              postgresql: {
                use_pg_rewind: true,
                parameters: {
                  wal_level: 'replica',
                  hot_standby: 'on',
                  max_wal_senders: 10,
                  max_replication_slots: 10,
                  wal_log_hints: 'on',
                  max_connections: 200,
                  synchronous_commit: 'on',
                },
              },
            },
            initdb: [{ encoding: 'UTF8' }, { locale: 'C.UTF-8' }],
            pg_hba: ['local all all trust', 'host all all 127.0.0.1/32 trust', 'host replication replicator 127.0.0.1/32 trust'],
          },
          postgresql: {
            listen: `127.0.0.1:${pgPort}`,
            connect_address: `127.0.0.1:${pgPort}`,
            data_dir: dataDir,
            bin_dir: PG_BIN,
            pgpass: path.join(nodeDir, 'pgpass'),
            authentication: { superuser: { username: 'postgres', password: 'postgres' }, replication: { username: 'replicator', password: 'replicator' } },
            parameters: { unix_socket_directories: nodeDir },
          },
        },
        null,
        2,
      ),
    );
    chownSync(cfg, uid, gid);
    const patroni = spawn('runuser', ['-u', 'postgres', '--', 'patroni', cfg], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    patroni.stderr?.on('data', (d: Buffer) => opts.log?.(`${name}: ${d.toString().trim()}`));
    children.push(patroni);
    const node: PatroniNode = {
      name,
      pgPort,
      restPort,
      dataDir,
      patroni,
      postmasterPid: () => {
        const f = path.join(dataDir, 'postmaster.pid');
        if (!existsSync(f)) return undefined;
        const pid = Number(readFileSync(f, 'utf8').split('\n')[0]);
        return Number.isInteger(pid) && pid > 0 ? pid : undefined;
      },
      role: () => restRole(restPort),
    };
    nodes.push(node);
    // The first node bootstraps the cluster before the second clones it.
    const want = i === 1 ? 'primary' : 'replica';
    for (let t = 0; t < 600 && (await node.role()) !== want; t++) await sleep(200);
    if ((await node.role()) !== want) throw new Error(`patroni ${name} did not become ${want}`);
  }

  const killGroup = (c: ChildProcess) => {
    try {
      if (c.pid) process.kill(-c.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  return {
    etcd: { port: etcdPort, child: etcd },
    nodes,
    primary: async () => {
      for (const n of nodes) if ((await n.role()) === 'primary') return n;
      return undefined;
    },
    stop: async () => {
      // Patroni stops its PostgreSQL on SIGTERM; anything left is killed.
      for (const n of nodes)
        if (n.patroni.pid)
          try {
            process.kill(-n.patroni.pid, 'SIGTERM');
          } catch {
            /* gone */
          }
      for (let i = 0; i < 50 && nodes.some((n) => n.postmasterPid() && isAlive(n.postmasterPid()!)); i++) await sleep(200);
      for (const n of nodes) {
        const pid = n.postmasterPid();
        if (pid && isAlive(pid))
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            /* gone */
          }
      }
      children.forEach(killGroup);
    },
  };
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
