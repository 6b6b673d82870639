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
 *
 * With `auth` (always under `--hosts`) every port asks for credentials: `pg_hba` has only
 * `scram-sha-256` lines (no `trust`), Patroni's REST API answers its unsafe endpoints (switchover,
 * restart, configuration) only with a password, and etcd runs with authentication on (Patroni has a
 * user of its own, read-write on its keys only). With `tls`, PostgreSQL takes only TLS connections from
 * the network (`hostssl`), with a certificate of the layout's CA, and the replication and Patroni's own
 * connections verify it (`verify-full`); etcd speaks TLS only, to its clients and between its members
 * (who also prove themselves to each other with the CA's certificates: `--peer-client-cert-auth`), and
 * Patroni's REST API is HTTPS (the members, HAProxy's checks and the tools verify it against the CA).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { freePort } from '../private-services.js';
import type { Placement } from './redis-sentinel.js';
import { restCall, restStatus } from './rest.js';
import { privateDir, writePrivate } from './secrets.js';

export interface PatroniNode {
  name: string;
  /** Its address (127.0.0.1, or its host's under `--hosts`). */
  host: string;
  pgPort: number;
  restPort: number;
  /** `https://host:restPort` under TLS, else `http://`. */
  restUrl: string;
  dataDir: string;
  patroni: ChildProcess;
  /** The postmaster's pid (from postmaster.pid), once the server runs. */
  postmasterPid(): number | undefined;
  role(): Promise<'primary' | 'replica' | 'down'>;
}

export interface EtcdMember {
  name: string;
  host: string;
  port: number;
  peerPort: number;
  /** `https://host:port` under TLS, else `http://`. */
  url: string;
  child: ChildProcess;
}

export interface PatroniCluster {
  /** The first etcd member (the one-machine layout has only it). */
  etcd: { port: number; child: ChildProcess };
  etcdMembers: EtcdMember[];
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

async function restRole(restUrl: string, caFile: string | undefined): Promise<'primary' | 'replica' | 'down'> {
  try {
    const res = await restCall(`${restUrl}/patroni`, { timeoutMs: 1000, caFile });
    const body = JSON.parse(res.text) as { role?: string; state?: string };
    if (body.state !== 'running') return 'down';
    return body.role === 'master' || body.role === 'primary' ? 'primary' : 'replica';
  } catch {
    return 'down';
  }
}

export interface PatroniAuth {
  superuser: string;
  replication: string;
  rest: string;
  etcdRoot: string;
  etcdPatroni: string;
  /** The subnet the clients and the other nodes connect from (`pg_hba`). */
  clientSubnet: string;
}

export interface PatroniTls {
  caFile: string;
  /** A server certificate whose names cover every address PostgreSQL is reached at (nodes, proxy); Patroni's REST API uses it too. */
  certFile: string;
  keyFile: string;
  /** The etcd members' certificate (server and peer): their addresses. */
  etcd: { certFile: string; keyFile: string };
}

export interface PatroniOptions {
  dir: string;
  nodes?: number;
  log?: (line: string) => void;
  /** Where the etcd members and the nodes run (default: one etcd member, loopback, free ports). */
  placement?: { etcd: Placement[]; nodes: Placement[] };
  auth?: PatroniAuth;
  tls?: PatroniTls;
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

/** etcd's v3 API over its JSON gateway (no etcdctl needed). */
async function etcdCall(base: string, caFile: string | undefined, endpoint: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await restCall(`${base}/v3/${endpoint}`, { method: 'POST', body: JSON.stringify(body), timeoutMs: 5000, caFile });
  const json = JSON.parse(res.text) as Record<string, unknown>;
  if (res.status !== 200) throw new Error(`etcd ${endpoint}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** etcd's v2 API (its own users and roles, apart from v3's). */
async function etcdV2Call(base: string, caFile: string | undefined, endpoint: string, body: unknown, basic?: string): Promise<void> {
  const res = await restCall(`${base}/v2/${endpoint}`, {
    method: 'PUT',
    body: JSON.stringify(body),
    timeoutMs: 5000,
    caFile,
    headers: basic ? { authorization: `Basic ${Buffer.from(basic).toString('base64')}` } : {},
  });
  if (res.status !== 200 && res.status !== 201) throw new Error(`etcd v2 ${endpoint}: ${res.status} ${res.text}`);
}

/**
 * Authentication on both of etcd's APIs: a `root` user, a `patroni` user read-write on Patroni's keys
 * (`/service/`) only. Patroni uses the v2 API (see `etcd:` below); v2's `guest` role, which may do
 * anything by default, loses every right, and v3 gets the same users so that neither store is open.
 */
async function enableEtcdAuth(base: string, caFile: string | undefined, auth: PatroniAuth): Promise<void> {
  const call = (endpoint: string, body: unknown) => etcdCall(base, caFile, endpoint, body);
  await call('auth/user/add', { name: 'root', password: auth.etcdRoot });
  await call('auth/user/grant', { user: 'root', role: 'root' });
  await call('auth/role/add', { name: 'patroni' });
  await call('auth/role/grant', { name: 'patroni', perm: { permType: 'READWRITE', key: b64('/service/'), range_end: b64('/service0') } });
  await call('auth/user/add', { name: 'patroni', password: auth.etcdPatroni });
  await call('auth/user/grant', { user: 'patroni', role: 'patroni' });
  await call('auth/enable', {});

  const v2 = (endpoint: string, body: unknown, basic?: string) => etcdV2Call(base, caFile, endpoint, body, basic);
  await v2('auth/users/root', { user: 'root', password: auth.etcdRoot });
  await v2('auth/roles/patroni', { role: 'patroni', permissions: { kv: { read: ['/service/*'], write: ['/service/*'] } } });
  await v2('auth/users/patroni', { user: 'patroni', password: auth.etcdPatroni, roles: ['patroni'] });
  await v2('auth/enable', {});
  await v2('auth/roles/guest', { role: 'guest', revoke: { kv: { read: ['/*'], write: ['/*'] } } }, `root:${auth.etcdRoot}`);
}

/** A copy of `from` owned by the postgres user (who runs etcd, Patroni and PostgreSQL, and must read their keys). */
function copyOwned(from: string, to: string, owner: { uid: number; gid: number }): string {
  copyFileSync(from, to);
  chmodSync(to, 0o600);
  chownSync(to, owner.uid, owner.gid);
  return to;
}

export async function startPatroniCluster(opts: PatroniOptions): Promise<PatroniCluster> {
  const children: ChildProcess[] = [];
  const { uid, gid } = userIds('postgres');
  const pgUser = { uid, gid };
  const own = (p: string) => {
    mkdirSync(p, { recursive: true });
    chownSync(p, uid, gid);
  };
  const run = (where: Placement | undefined, command: string, args: string[]): [string, string[]] =>
    where?.wrap ? where.wrap(command, args) : [command, args];
  own(opts.dir);
  const auth = opts.auth;
  const tls = opts.tls;
  const scheme = tls ? 'https' : 'http';

  // etcd: one member on loopback, or one per host given.
  const etcdPlaces: (Placement | undefined)[] = opts.placement?.etcd ?? [undefined];
  const etcdMembers: EtcdMember[] = [];
  const etcdSpecs = [];
  for (const [i, where] of etcdPlaces.entries()) {
    const host = where?.address ?? '127.0.0.1';
    const port = where?.port ?? (await freePort());
    const peerPort = where?.port ? where.port + 1 : await freePort();
    etcdSpecs.push({ name: `etcd-${i + 1}`, host, port, peerPort, where });
  }
  const initialCluster = etcdSpecs.map((e) => `${e.name}=${scheme}://${e.host}:${e.peerPort}`).join(',');
  for (const e of etcdSpecs) {
    const etcdDir = path.join(opts.dir, e.name);
    own(etcdDir);
    privateDir(etcdDir, pgUser);
    let etcdTls: string[] = [];
    if (tls) {
      const cert = copyOwned(tls.etcd.certFile, path.join(etcdDir, 'etcd.pem'), pgUser);
      const key = copyOwned(tls.etcd.keyFile, path.join(etcdDir, 'etcd.key'), pgUser);
      const ca = copyOwned(tls.caFile, path.join(etcdDir, 'ca.pem'), pgUser);
      // Clients log in with a user and password over TLS; members prove themselves with certificates.
      etcdTls = [
        '--cert-file',
        cert,
        '--key-file',
        key,
        '--peer-cert-file',
        cert,
        '--peer-key-file',
        key,
        '--peer-trusted-ca-file',
        ca,
        '--peer-client-cert-auth',
        // Pinned to the members' own certificate (CN etcd): another certificate of the layout's CA
        // (Redis's, PostgreSQL's) is no peer.
        '--peer-cert-allowed-cn',
        'etcd',
      ];
    }
    const [command, args] = run(e.where, 'runuser', [
      '-u',
      'postgres',
      '--',
      'etcd',
      '--name',
      e.name,
      '--data-dir',
      path.join(etcdDir, 'data'),
      '--listen-client-urls',
      `${scheme}://${e.host}:${e.port}`,
      '--advertise-client-urls',
      `${scheme}://${e.host}:${e.port}`,
      '--listen-peer-urls',
      `${scheme}://${e.host}:${e.peerPort}`,
      '--initial-advertise-peer-urls',
      `${scheme}://${e.host}:${e.peerPort}`,
      '--initial-cluster',
      initialCluster,
      '--initial-cluster-state',
      'new',
      '--initial-cluster-token',
      'faceid',
      '--enable-v2=true',
      ...etcdTls,
    ]);
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'ignore'], detached: true });
    children.push(child);
    etcdMembers.push({ name: e.name, host: e.host, port: e.port, peerPort: e.peerPort, url: `${scheme}://${e.host}:${e.port}`, child });
  }
  const etcdBase = `${scheme}://${etcdMembers[0]!.host}:${etcdMembers[0]!.port}`;
  for (let i = 0; i < 300; i++) {
    if ((await restStatus(`${etcdBase}/health`, { timeoutMs: 500, caFile: tls?.caFile })) === 200) break;
    await sleep(100);
  }
  if (auth) await enableEtcdAuth(etcdBase, tls?.caFile, auth);

  const nodes: PatroniNode[] = [];
  const nodeCount = opts.placement?.nodes.length ?? opts.nodes ?? 2;
  for (let i = 1; i <= nodeCount; i++) {
    const name = `pg${i}`;
    const where = opts.placement?.nodes[i - 1];
    const host = where?.address ?? '127.0.0.1';
    const pgPort = where?.port ?? (await freePort());
    const restPort = where?.port ? 8008 : await freePort();
    const nodeDir = path.join(opts.dir, name);
    own(nodeDir);
    // The node's directory holds its configuration (passwords) and TLS key: the postgres user's alone.
    privateDir(nodeDir, pgUser);
    const dataDir = path.join(nodeDir, 'data');
    const cfg = path.join(nodeDir, 'patroni.yml');
    let ssl: Record<string, string> = {};
    let connSsl: Record<string, string> = {};
    let restSsl: Record<string, string> = {};
    let etcdSsl: Record<string, string> = {};
    if (tls) {
      // PostgreSQL reads its key and the CA as the postgres user: copies in the node's own directory.
      const certFile = copyOwned(tls.certFile, path.join(nodeDir, 'server.pem'), pgUser);
      const keyFile = copyOwned(tls.keyFile, path.join(nodeDir, 'server.key'), pgUser);
      const caFile = copyOwned(tls.caFile, path.join(nodeDir, 'ca.pem'), pgUser);
      ssl = { ssl: 'on', ssl_cert_file: certFile, ssl_key_file: keyFile, ssl_ca_file: caFile, ssl_min_protocol_version: 'TLSv1.2' };
      connSsl = { sslmode: 'verify-full', sslrootcert: caFile };
      // The REST API on HTTPS with the node's certificate; `cafile` is also what Patroni verifies the
      // other members' REST APIs against when it asks them about a fail-over.
      restSsl = { certfile: certFile, keyfile: keyFile, cafile: caFile };
      etcdSsl = { protocol: 'https', cacert: caFile };
    }
    const hostLine = tls ? 'hostssl' : 'host';
    const pgHba = auth
      ? [
          'local all all scram-sha-256',
          `${hostLine} replication replicator ${auth.clientSubnet} scram-sha-256`,
          `${hostLine} all all ${auth.clientSubnet} scram-sha-256`,
        ]
      : ['local all all trust', 'host all all 127.0.0.1/32 trust', 'host replication replicator 127.0.0.1/32 trust'];
    // YAML written as JSON (a subset of YAML): no YAML library needed.
    writePrivate(
      cfg,
      JSON.stringify(
        {
          scope: 'faceid',
          name,
          log: { level: process.env.PATRONI_LOG_LEVEL ?? 'WARNING', dir: nodeDir },
          restapi: {
            listen: `${host}:${restPort}`,
            connect_address: `${host}:${restPort}`,
            ...(auth ? { authentication: { username: 'patroni', password: auth.rest } } : {}),
            ...restSsl,
          },
          // etcd's v2 API, not `etcd3`: the etcd3 driver of Debian's Patroni (3.0.2) renews the leader
          // key with an unconditional put when its lease changed, so a primary cut off long enough for
          // its lease to expire, healed while its view of the cluster is stale, overwrote the promoted
          // node's leader key and was promoted again, the other demoted: the writes answered in
          // between were on the demoted node only (seen in `npm run chaos -- ha --hosts`). The v2
          // driver renews with compare-and-swap on its own name (`prevValue`) and takes the key only
          // if it does not exist (`prevExist=false`).
          etcd: {
            hosts: etcdMembers.map((e) => `${e.host}:${e.port}`),
            ...(auth ? { username: 'patroni', password: auth.etcdPatroni } : {}),
            ...etcdSsl,
          },
          bootstrap: {
            dcs: {
              // The leader key lives 10 s: a primary gone is replaced after at most ttl + loop_wait.
              // A primary that cannot renew it (cut off from etcd) demotes itself: the fencing.
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
                  password_encryption: 'scram-sha-256',
                },
              },
            },
            initdb: [{ encoding: 'UTF8' }, { locale: 'C.UTF-8' }, ...(auth ? [{ auth: 'scram-sha-256' }] : [])],
            pg_hba: pgHba,
          },
          postgresql: {
            listen: `${host}:${pgPort}`,
            connect_address: `${host}:${pgPort}`,
            data_dir: dataDir,
            bin_dir: PG_BIN,
            pgpass: path.join(nodeDir, 'pgpass'),
            authentication: auth
              ? {
                  superuser: { username: 'postgres', password: auth.superuser, ...connSsl },
                  replication: { username: 'replicator', password: auth.replication, ...connSsl },
                  rewind: { username: 'postgres', password: auth.superuser, ...connSsl },
                }
              : { superuser: { username: 'postgres', password: 'postgres' }, replication: { username: 'replicator', password: 'replicator' } },
            parameters: { unix_socket_directories: nodeDir, ...ssl },
            ...(auth ? { pg_hba: pgHba } : {}),
          },
        },
        null,
        2,
      ),
      pgUser,
    );
    const [command, args] = run(where, 'runuser', ['-u', 'postgres', '--', 'patroni', cfg]);
    const patroni = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    patroni.stderr?.on('data', (d: Buffer) => opts.log?.(`${name}: ${d.toString().trim()}`));
    children.push(patroni);
    const node: PatroniNode = {
      name,
      host,
      pgPort,
      restPort,
      restUrl: `${scheme}://${host}:${restPort}`,
      dataDir,
      patroni,
      postmasterPid: () => {
        const f = path.join(dataDir, 'postmaster.pid');
        if (!existsSync(f)) return undefined;
        const pid = Number(readFileSync(f, 'utf8').split('\n')[0]);
        return Number.isInteger(pid) && pid > 0 ? pid : undefined;
      },
      role: () => restRole(`${scheme}://${host}:${restPort}`, tls?.caFile),
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
    etcd: { port: etcdMembers[0]!.port, child: etcdMembers[0]!.child },
    etcdMembers,
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
