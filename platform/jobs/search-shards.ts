/**
 * Search shards (SEARCH_SHARDS > 1): the gallery split by a hash of the user id, each shard's search
 * processes (its replicas) holding only its rows; a search is broadcast once to every shard and the
 * shards' exact top-k merged by the web process (docs/vector-index.md, "Shards").
 *
 * The shard of a user: the first 4 bytes of MD5 of the user id's canonical text (lower-case UUID with
 * dashes), read as an unsigned big-endian integer, modulo the shard count. MD5 here is a spreading
 * function, not a security measure: PostgreSQL computes the same expression (`shardSql`), so a full
 * build reads only its shard's rows, and ids that are not random (time-ordered UUIDs) still spread evenly.
 *
 * The wire: ONE Redis stream per shard count (`searchShardStream`), one consumer group per shard. A
 * broadcast is one XADD; Redis hands each entry to exactly one consumer of every group (one replica
 * of every shard), so replicas of a shard share the load and a replica that dies takes only the
 * entries it held (their callers answer 503 at SEARCH_SHARD_TIMEOUT_MS). Each shard's probe embedding
 * is its own sealed value beside the entry (platform/face-path/search-embedding.ts), taken once; the
 * results come back on the caller's reply list (platform/face-path/replies.ts). Streams of different
 * shard counts are independent, so an old and a new shard set can run side by side while resharding.
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { SealedEmbeddingRef } from '../face-path/search-embedding.js';
import type { SearchHit } from './search.js';

export interface ShardSpec {
  /** This process's shard, 0 ≤ index < count. */
  index: number;
  count: number;
}

/** The shard of a user id among `count`. */
export function shardOf(userId: string, count: number): number {
  if (count <= 1) return 0;
  return createHash('md5').update(userId.toLowerCase()).digest().readUInt32BE(0) % count;
}

/** The same in SQL, for a uuid column (`bit(32)::bigint` is unsigned: a 32-bit field in a 64-bit integer). */
export const shardSql = (column: string): string => `(('x' || substr(md5(${column}::text), 1, 8))::bit(32)::bigint % ?)`;

/** The broadcast stream of a shard count (under the deployment's REDIS_PREFIX). */
export const searchShardStream = (redisPrefix: string, count: number): string => `${redisPrefix}:search:shards:${count}`;

/** The consumer group of a shard. */
export const shardGroup = (index: number): string => `shard-${index}`;

/**
 * How many entries a stream keeps (XADD MAXLEN ~): entries are read within their deadline (seconds)
 * or skipped, so this only bounds memory; an entry holds refs and salts, never an embedding.
 */
export const SHARD_STREAM_MAXLEN = 10_000;

/** One broadcast search: what every shard reads. `refs[i]` is shard i's sealed probe. */
export interface ShardSearchMessage {
  /** The caller's reply id prefix: shard i answers as `${id}:${i}`. */
  id: string;
  replyTo: string;
  deadlineAt: number;
  k: number;
  minSeq: string;
  excludeUserId?: string;
  refs: SealedEmbeddingRef[];
}

/** What each shard answers: its exact top-k among its own rows. */
export interface ShardSearchResult {
  shard: number;
  hits: SearchHit[];
  appliedSeq: string;
  indexSize: number;
  ms: number;
}

export const shardReplyId = (id: string, shard: number): string => `${id}:${shard}`;

/** Parses an entry's `m` field; null for anything malformed (never throws). */
export function parseShardMessage(raw: string, count: number): ShardSearchMessage | null {
  try {
    const m = JSON.parse(raw) as Partial<ShardSearchMessage>;
    if (typeof m.id !== 'string' || typeof m.replyTo !== 'string' || typeof m.deadlineAt !== 'number') return null;
    if (typeof m.k !== 'number' || typeof m.minSeq !== 'string' || !Array.isArray(m.refs) || m.refs.length !== count) return null;
    return m as ShardSearchMessage;
  } catch {
    return null;
  }
}

/**
 * The merge: every shard's exact top-k, ordered by exact cosine (ties by user id, so the order does
 * not depend on which shard answered first), the best k kept. Each user is in one shard only, so the
 * merged list is the one a single index over every row gives.
 */
export function mergeShardHits(results: readonly ShardSearchResult[], k: number): SearchHit[] {
  const all = results.flatMap((r) => r.hits);
  all.sort((a, b) => b.score - a.score || (a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0));
  return all.slice(0, k);
}

/**
 * A replica that has beaten within this long is live: it beats every SHARD_REPLICA_BEAT_MS while it
 * serves, so a live one is never quiet for long, and a killed one counts no more after this.
 *
 * Why a beat of its own and not the consumer group's `idle` (XINFO CONSUMERS): before Redis 7.2 a
 * consumer's idle time is the time since an entry was last delivered to it (an empty blocking read
 * does not reset it), so with no searches for a few seconds every replica looked dead, and a replica
 * that had just started was not listed at all until its first entry.
 */
export const SHARD_REPLICA_IDLE_MS = 5000;
export const SHARD_REPLICA_BEAT_MS = 1000;
/** Beats older than this are dropped from the set (by the beats themselves). */
const SHARD_REPLICA_FORGET_MS = 10 * 60_000;

/** The sorted set of a shard set's live replicas: member `<shard>:<consumer>`, score its last beat (ms, Redis's clock). */
export const shardReplicaSet = (redisPrefix: string, count: number): string => `${searchShardStream(redisPrefix, count)}:replicas`;

// Redis's own clock on both sides (the web processes and the replicas run on different hosts).
const NOW_MS = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)";
const BEAT_SCRIPT = `${NOW_MS}
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return now`;
const LIVE_SCRIPT = `${NOW_MS}
return redis.call('ZRANGEBYSCORE', KEYS[1], now - tonumber(ARGV[1]), '+inf')`;

/** A replica's beat (one command): it serves `shard`'s group as `consumer`. */
export async function beatShardReplica(redis: Pick<Redis, 'eval'>, redisPrefix: string, shard: ShardSpec, consumer: string): Promise<void> {
  await redis.eval(BEAT_SCRIPT, 1, shardReplicaSet(redisPrefix, shard.count), `${shard.index}:${consumer}`, SHARD_REPLICA_FORGET_MS);
}

/** A replica that stops cleanly leaves the set at once. */
export async function leaveShardReplicas(redis: Pick<Redis, 'zrem'>, redisPrefix: string, shard: ShardSpec, consumer: string): Promise<void> {
  await redis.zrem(shardReplicaSet(redisPrefix, shard.count), `${shard.index}:${consumer}`);
}

/** Replicas serving each shard now (those that beat within SHARD_REPLICA_IDLE_MS): one command for every shard. */
export async function shardReplicas(redis: Pick<Redis, 'eval'>, redisPrefix: string, count: number): Promise<{ shard: number; replicas: number }[]> {
  const live = (await redis.eval(LIVE_SCRIPT, 1, shardReplicaSet(redisPrefix, count), SHARD_REPLICA_IDLE_MS)) as string[];
  const out = Array.from({ length: count }, (_, shard) => ({ shard, replicas: 0 }));
  for (const member of live) {
    const shard = Number(member.slice(0, member.indexOf(':')));
    if (Number.isInteger(shard) && shard >= 0 && shard < count) out[shard]!.replicas++;
  }
  return out;
}
