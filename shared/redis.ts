/** Redis connections and the key naming of this deployment (every key carries REDIS_PREFIX). */
import { Redis, type RedisOptions } from 'ioredis';

export function createRedis(url: string, opts: RedisOptions = {}): Redis {
  return new Redis(url, {
    // While Redis is down a command waits at most commandTimeout (then the request answers 503),
    // and the client reconnects in the background.
    maxRetriesPerRequest: 1,
    enableOfflineQueue: true,
    commandTimeout: 2000,
    connectTimeout: 2000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
    ...opts,
  });
}

/** BullMQ needs its own connection options: no per-request retry cap on blocking commands. */
export function bullConnection(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, enableOfflineQueue: true, connectTimeout: 2000, retryStrategy: (a) => Math.min(a * 200, 2000) });
}

export type KeySpace = (...parts: string[]) => string;
export const keySpace = (prefix: string): KeySpace => (...parts) => [prefix, ...parts].join(':');

export type { Redis };
