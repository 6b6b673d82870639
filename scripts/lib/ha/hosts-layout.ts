/**
 * What `npm run start:ha -- --hosts` adds to the one-machine layout (scripts/start-ha.ts): a host per
 * part (./hosts.ts), generated credentials for every link and a CA with the servers' certificates
 * (./secrets.ts), and the addresses, passwords and TLS settings the parts and the processes use.
 *
 *   hosts       redis-master, redis-replica, sentinel-1..3, etcd-1..3, pg1, pg2, web-1, web-2,
 *               face-1, face-2, search-1, search-2 (search-3... with shards), `balancer` (the web
 *               HAProxy, on PORT of its address) and `pg-proxy` (the PostgreSQL HAProxy, on 6432 of
 *               its address): nothing of the layout runs in the machine's own namespace but the
 *               supervisor, which relays PORT on the machine's loopback to the balancer's host.
 *   credentials PostgreSQL scram-sha-256 only (the processes as `faceid_app`, migrations as the owner
 *               `faceid_owner`), Redis and Sentinel passwords, etcd users, Patroni REST password.
 *   TLS         (unless `--no-tls`) PostgreSQL `hostssl` with `sslmode=verify-full`, Redis and the
 *               Sentinels on `tls-port` only (`rediss://`), etcd (clients and peers, peers by
 *               certificate) and Patroni's REST API on HTTPS, all against the CA made here; the
 *               processes trust it through NODE_EXTRA_CA_CERTS, HAProxy's checks through `ca-file`.
 */
import path from 'node:path';
import type { Placement } from './redis-sentinel.js';
import { makeHosts, type Host, type HostNetwork } from './hosts.js';
import { generateSecrets, makeCertificates, type Certificates, type Secrets } from './secrets.js';

export const REDIS_PARTS = ['redis-master', 'redis-replica', 'sentinel-1', 'sentinel-2', 'sentinel-3'] as const;
export const PG_PARTS = ['etcd-1', 'etcd-2', 'etcd-3', 'pg1', 'pg2'] as const;
export const PROCESS_PARTS = ['web-1', 'web-2', 'face-1', 'face-2', 'search-1', 'search-2'] as const;
/** The two proxies, each on a host of its own: the balancer in front of the webs, and PostgreSQL's. */
export const PROXY_PARTS = ['balancer', 'pg-proxy'] as const;

/** Ports on the hosts (each host has every port to itself; Redis nodes keep ports of their own so a node is known by its port). */
export const HOST_PORTS = {
  redisMaster: 6379,
  redisReplica: 6380,
  sentinel: 26379,
  etcd: 2379,
  postgres: 5432,
  patroniRest: 8008,
  /** The PostgreSQL proxy on its host (not 5432: a port of its own, as the proxies of the one-machine layout). */
  postgresProxy: 6432,
  web: 3000,
  face: 3100,
  search: 3101,
} as const;

export interface HostsLayout {
  network: HostNetwork;
  /** The balancer's host (HAProxy in front of the web processes). */
  balancer: Host;
  /** The PostgreSQL proxy's host (HAProxy in front of the Patroni nodes). */
  pgProxy: Host;
  secrets: Secrets;
  certs: Certificates | undefined;
  tls: boolean;
  place(part: string, port?: number): Placement;
  redisTls: { certFile: string; keyFile: string; caFile: string } | undefined;
  pgTls: { certFile: string; keyFile: string; caFile: string; etcd: { certFile: string; keyFile: string } } | undefined;
  /** `postgres://user:password@proxy/db` with TLS verified against the layout's CA when on. */
  pgUrl(user: string, password: string, database: string): string;
  /** The same URL without its password (for layout.json and the logs). */
  pgUrlShown(user: string, database: string): string;
  redisUrl(): string;
  remove(): void;
}

/** The search hosts past `search-2`: with shards, two replicas of every shard, each copy on a host of its own. */
export const extraSearchParts = (searchHosts: number): string[] => Array.from({ length: Math.max(0, searchHosts - 2) }, (_, i) => `search-${i + 3}`);

export function makeHostsLayout(haDir: string, opts: { tls: boolean; tag: string; subnetIndex: number; searchHosts?: number }): HostsLayout {
  const network = makeHosts([...REDIS_PARTS, ...PG_PARTS, ...PROCESS_PARTS, ...PROXY_PARTS, ...extraSearchParts(opts.searchHosts ?? 2)], {
    tag: opts.tag,
    subnetIndex: opts.subnetIndex,
  });
  try {
    const secrets = generateSecrets(path.join(haDir, 'secrets'));
    const certs = opts.tls ? makeCertificates(path.join(haDir, 'secrets', 'tls')) : undefined;
    const addr = (part: string) => network.host(part).address;
    const pgProxy = network.host('pg-proxy');
    const redisTls = certs && { ...certs.issue('redis', [...REDIS_PARTS.map(addr), '127.0.0.1']), caFile: certs.caFile };
    // One certificate for both nodes and the proxy: a client reaching a node through the proxy checks
    // the name it asked for (the proxy's address) against the node's certificate.
    const pgTls = certs && {
      // The nodes' names too: HAProxy's checks of Patroni's REST API verify the name (`verifyhost`).
      ...certs.issue('postgres', ['pg1', 'pg2', ...['pg1', 'pg2'].map(addr), pgProxy.address]),
      caFile: certs.caFile,
      etcd: certs.issue('etcd', ['etcd-1', 'etcd-2', 'etcd-3'].map(addr)),
    };
    const shown = (user: string, database: string, password?: string) =>
      `postgres://${user}${password ? `:${encodeURIComponent(password)}` : ''}@${pgProxy.address}:${HOST_PORTS.postgresProxy}/${database}` +
      (certs ? `?sslmode=verify-full&sslrootcert=${encodeURIComponent(certs.caFile)}` : '');
    return {
      network,
      balancer: network.host('balancer'),
      pgProxy,
      secrets,
      certs,
      tls: opts.tls,
      place: (part, port) => ({ address: addr(part), port, wrap: (command, args) => network.inHost(part, command, args) }),
      redisTls,
      pgTls,
      pgUrl: (user, password, database) => shown(user, database, password),
      pgUrlShown: (user, database) => shown(user, database),
      // With Sentinels the host part is not used: the password and the scheme (TLS) are.
      redisUrl: () => `${certs ? 'rediss' : 'redis'}://:${encodeURIComponent(secrets.get('redis'))}@redis`,
      remove: () => network.remove(),
    };
  } catch (e) {
    network.remove();
    throw e;
  }
}
