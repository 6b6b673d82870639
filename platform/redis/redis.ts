/** Redis connections and the key naming of this deployment (every key carries REDIS_PREFIX). */
import { Redis, type RedisOptions } from 'ioredis';

/**
 * Where Redis is: a URL (one server), or Sentinels that name the current master of `name`. With
 * Sentinels the URL still carries the password, database number and `rediss://` (TLS), not the address.
 */
export type RedisTarget = string | { url: string; sentinels: { host: string; port: number }[]; name: string };

/** The target of this deployment's settings: Sentinels when REDIS_SENTINELS is set, else REDIS_URL. */
export function redisTarget(redis: { url: string; sentinels: string; sentinelName: string }): RedisTarget {
  const sentinels = redis.sentinels
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '')
    .map((e) => {
      const at = e.lastIndexOf(':');
      return { host: e.slice(0, at), port: Number(e.slice(at + 1)) };
    });
  return sentinels.length ? { url: redis.url, sentinels, name: redis.sentinelName } : redis.url;
}

/**
 * ioredis options of a Sentinel target. The client asks the Sentinels for the master on every
 * (re)connect, and checks the role of the server it reaches (a demoted master is left for the new one).
 * `sentinelRetryStrategy` never gives up: a client whose Sentinels were all unreachable for a while
 * must not end in ioredis's terminal `end` state, from which a BullMQ worker never consumes again
 * (bullmq issues #3088, #4378). A demoted master keeps its clients but refuses their writes with
 * READONLY (and unblocks a worker's blocking pop with UNBLOCKED): `reconnectOnError` reconnects on
 * READONLY, through the Sentinels, and resends the command. A connection that only reads would stay
 * on the demoted master: `SwitchWatch` moves every connection at the Sentinels' `+switch-master`.
 * (ioredis's own `failoverDetector` is not used: its Sentinel subscribers have no error listener and
 * outlived their closed clients, reconnecting for ever once the Sentinels were gone.)
 */
function sentinelOptions(target: Exclude<RedisTarget, string>): RedisOptions {
  const u = new URL(target.url);
  const tls = u.protocol === 'rediss:';
  const db = u.pathname.length > 1 ? Number(u.pathname.slice(1)) : 0;
  return {
    sentinels: target.sentinels,
    name: target.name,
    username: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
    db: Number.isInteger(db) ? db : 0,
    // `tls` is for the data nodes (with enableTLSForSentinelMode), `sentinelTLS` for the Sentinels themselves.
    ...(tls ? { tls: {}, enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
    // The Sentinels' own password, when they have one, is the same as the data nodes' (docs/deployment.md).
    sentinelPassword: u.password ? decodeURIComponent(u.password) : undefined,
    sentinelRetryStrategy: (attempt: number) => Math.min(attempt * 100, 1000),
    reconnectOnError: (err: Error) => (err.message.startsWith('READONLY') ? 2 : false),
  };
}

/**
 * One subscription per process and Sentinel set to `+switch-master`, held while any connection to
 * that set is open: at a switch every such connection reconnects (through the Sentinels, to the new
 * master) at once, instead of at its next write.
 */
class SwitchWatch {
  private static readonly watches = new Map<string, SwitchWatch>();
  private readonly clients = new Set<Redis>();
  private readonly subscribers: Redis[];

  static track(target: Exclude<RedisTarget, string>, client: Redis): void {
    const key = `${target.name}@${target.sentinels.map((s) => `${s.host}:${s.port}`).join(',')}`;
    let watch = SwitchWatch.watches.get(key);
    if (!watch) {
      watch = new SwitchWatch(target, () => SwitchWatch.watches.delete(key));
      SwitchWatch.watches.set(key, watch);
    }
    watch.add(client);
  }

  private constructor(
    target: Exclude<RedisTarget, string>,
    private readonly onEmpty: () => void,
  ) {
    const url = new URL(target.url);
    const password = url.password || undefined;
    this.subscribers = target.sentinels.map((s) => {
      // Like the clients' own Sentinel connections: the URL's password, and TLS with `rediss://`.
      const sub = new Redis({
        host: s.host,
        port: s.port,
        password: password && decodeURIComponent(password),
        ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
        connectTimeout: 2000,
        maxRetriesPerRequest: null,
        retryStrategy: (a) => Math.min(a * 200, 2000),
      });
      sub.on('error', () => {}); // a Sentinel away is normal; the others still tell
      sub.subscribe('+switch-master').catch(() => {});
      sub.on('message', (_channel: string, message: string) => {
        // `<name> <old-ip> <old-port> <new-ip> <new-port>`
        if (message.split(' ')[0] !== target.name) return;
        for (const c of this.clients) if (c.status === 'ready') c.disconnect(true);
      });
      return sub;
    });
  }

  private add(client: Redis): void {
    this.clients.add(client);
    client.once('end', () => {
      this.clients.delete(client);
      if (this.clients.size === 0) {
        this.onEmpty();
        for (const sub of this.subscribers) sub.disconnect();
      }
    });
  }
}

function connect(target: RedisTarget, opts: RedisOptions): Redis {
  if (typeof target === 'string') return new Redis(target, opts);
  const track = (client: Redis): Redis => {
    SwitchWatch.track(target, client);
    // BullMQ gives each worker a blocking connection made with duplicate(): it moves at a switch too.
    const duplicate = client.duplicate.bind(client);
    client.duplicate = (override) => track(duplicate(override));
    return client;
  };
  return track(new Redis({ ...sentinelOptions(target), ...opts }));
}

export function createRedis(target: RedisTarget, opts: RedisOptions = {}): Redis {
  return connect(target, {
    // While Redis is down a command waits at most commandTimeout (then the request answers 503),
    // and the client reconnects in the background.
    maxRetriesPerRequest: 1,
    enableOfflineQueue: true,
    commandTimeout: 2000,
    connectTimeout: 2000,
    // A connection that gets no answer for this long is taken for dead and made again. A link cut and
    // healed leaves the connection open but silent until the kernel's next retransmission, seconds
    // to minutes later (its backoff doubles while the link is down); a new connection answers at once.
    socketTimeout: STALLED_SOCKET_MS,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
    ...opts,
  });
}

/** How long a connection with a command outstanding may go without any answer (no blocking command may wait longer). */
export const STALLED_SOCKET_MS = 3000;

/**
 * BullMQ needs its own connection options: no per-request retry cap on blocking commands. `opts`:
 * e.g. `socketTimeout` for a connection whose blocking commands are all shorter than it.
 */
export function bullConnection(target: RedisTarget, opts: RedisOptions = {}): Redis {
  return connect(target, {
    maxRetriesPerRequest: null,
    enableOfflineQueue: true,
    connectTimeout: 2000,
    retryStrategy: (a) => Math.min(a * 200, 2000),
    ...opts,
  });
}

/** How long a write waits for the replica's acknowledgement before it is answered anyway. */
export const REPLICA_ACK_TIMEOUT_MS = 250;

/**
 * With Sentinels (a replicated Redis), waits until one replica has every write made so far on this
 * connection (`WAIT 1`), so that an answered write survives the master's loss. Without a replica
 * answering within REPLICA_ACK_TIMEOUT_MS it gives up and the write is answered anyway: a master
 * already alone cannot do better, and refusing would make one failure an outage (docs/deployment.md).
 * With a single Redis (no Sentinels) nothing to wait for.
 */
export async function replicaAcknowledged(redis: Redis): Promise<void> {
  if (!redis.options.sentinels?.length) return;
  await redis.wait(1, REPLICA_ACK_TIMEOUT_MS);
}

export type KeySpace = (...parts: string[]) => string;
export const keySpace =
  (prefix: string): KeySpace =>
  (...parts) =>
    [prefix, ...parts].join(':');

export type { Redis };
