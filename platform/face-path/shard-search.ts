/**
 * The web process's side of a sharded search (SEARCH_SHARDS > 1; platform/jobs/search-shards.ts):
 * each shard's probe sealed as its own value, ONE stream entry for all shards, every shard's exact
 * top-k awaited on this process's reply list, one merge by exact cosine. A shard that has not
 * answered within SEARCH_SHARD_TIMEOUT_MS (or the request's deadline, if sooner) makes the whole
 * search a 503 `dependency_unavailable` with Retry-After: a list that misses a shard is never given.
 * With FAIL_FAST, a shard that has no replica reading its group is that 503 at once, before anything
 * is sent (./shard-admission.ts).
 */
import { randomUUID } from 'node:crypto';
import { AppError } from '../errors.js';
import {
  mergeShardHits,
  searchShardStream,
  SHARD_STREAM_MAXLEN,
  shardReplyId,
  type ShardSearchMessage,
  type ShardSearchResult,
} from '../jobs/search-shards.js';
import type { SearchHit } from '../jobs/search.js';
import { handoffKey } from './handoff.js';
import { ShardTimeoutError, type JobClient } from './job-client.js';
import { sealSearchEmbedding } from './search-embedding.js';
import type { HandoffSealer } from './sealing.js';

export interface ShardedSearchResult {
  hits: SearchHit[];
  /** The lowest change sequence a shard had applied (every shard had applied at least `minSeq`). */
  appliedSeq: string;
  /** Rows over every shard. */
  indexSize: number;
  /** The slowest shard's search stage. */
  ms: number;
}

export async function searchShards(
  deps: { jobs: Pick<JobClient, 'broadcast' | 'admitShards'>; sealer: HandoffSealer; redisPrefix: string; shards: number; shardTimeoutMs: number },
  request: { embedding: ArrayLike<number>; k: number; minSeq: string; excludeUserId?: string },
  deadlineAt: number,
): Promise<ShardedSearchResult> {
  const { shards } = deps;
  // A shard with no live replica: 503 at once (the fail-fast gate), not at the shard timeout.
  await deps.jobs.admitShards(shards);
  const id = randomUUID();
  const sealed = Array.from({ length: shards }, () => sealSearchEmbedding(deps.sealer, request.embedding));
  const until = Math.min(deadlineAt, Date.now() + deps.shardTimeoutMs);
  let replies: unknown[];
  try {
    replies = await deps.jobs.broadcast({
      stream: searchShardStream(deps.redisPrefix, shards),
      maxLen: SHARD_STREAM_MAXLEN,
      message: (replyTo) => {
        const m: ShardSearchMessage = {
          id,
          replyTo,
          deadlineAt: until,
          k: request.k,
          minSeq: request.minSeq,
          ...(request.excludeUserId ? { excludeUserId: request.excludeUserId } : {}),
          refs: sealed.map((x) => x.ref),
        };
        return JSON.stringify(m);
      },
      replyIds: sealed.map((_, i) => shardReplyId(id, i)),
      withValues: sealed.map((x) => ({ key: handoffKey(deps.redisPrefix, 'embedding', x.ref.embeddingRef), value: x.sealed })),
      deadlineAt: until,
    });
  } catch (e) {
    if (e instanceof ShardTimeoutError) {
      const missing = e.missing.map((r) => Number(r.slice(r.lastIndexOf(':') + 1)));
      throw new AppError('dependency_unavailable', 'A search shard did not answer in time; try again shortly', {
        retryAfter: e.retryAfter,
        details: { reason: 'search_shard_unavailable', shards: missing },
      });
    }
    if (e instanceof AppError) throw e;
    throw new AppError('dependency_unavailable', 'A search shard failed to answer; try again shortly', {
      retryAfter: 1,
      details: { reason: 'search_shard_failed' },
      cause: e,
    });
  }
  const results = replies as ShardSearchResult[];
  return {
    hits: mergeShardHits(results, request.k),
    appliedSeq: results
      .map((r) => BigInt(r.appliedSeq))
      .reduce((a, b) => (b < a ? b : a))
      .toString(),
    indexSize: results.reduce((n, r) => n + r.indexSize, 0),
    ms: Math.max(...results.map((r) => r.ms)),
  };
}
