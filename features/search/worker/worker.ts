/**
 * The search worker (Procfile `search`): one replica of the FAISS index over every canonical
 * embedding (replica.ts), serving the `search` queue (`knn`, `compare`) and `GET /health` on
 * SEARCH_HEALTH_PORT (`{ status, size, appliedSeq, factory, ... }`, read by the API's /health).
 * Any number of search workers can run at once; each builds its own index from PostgreSQL and
 * guarantees read-your-writes through the change log (docs/vector-index.md).
 */
import type { Config } from '../../../platform/config.js';
import { createDb } from '../../../platform/database/db.js';
import { RedisFaceHandoff } from '../../../platform/face-path/handoff.js';
import { HandoffSealer } from '../../../platform/face-path/sealing.js';
import { takeSearchEmbedding } from '../../../platform/face-path/search-embedding.js';
import type { SearchJob, SearchResult } from '../../../platform/jobs/index.js';
import type { Redis } from 'ioredis';
import { createLogger, type Logger } from '../../../platform/logger.js';
import { runQueues, type QueueRunner } from '../../../platform/worker-runtime/run-queue.js';
import { startStatusServer, type StatusServer } from '../../../platform/worker-runtime/status-server.js';
import { IndexReplica } from './replica.js';
import { keyRingOf } from '../../../platform/keys/templates.js';
import { bullConnection, redisTarget, STALLED_SOCKET_MS } from '../../../platform/redis/redis.js';
import type { ShardSpec } from '../../../platform/jobs/search-shards.js';
import { ShardConsumer } from './shard-consumer.js';

export interface RunningSearchWorker {
  url: string;
  close(): Promise<void>;
}

/** One search job: its probe embedding taken (once) from beside the job, then the op on the replica. */
export async function searchHandler(replica: Pick<IndexReplica, 'knn' | 'compare'>, handoff: RedisFaceHandoff, job: SearchJob): Promise<SearchResult> {
  const embedding = await takeSearchEmbedding(handoff, job);
  return job.op === 'knn' ? replica.knn(embedding, job.k, job.minSeq, job.excludeUserId ?? null) : replica.compare(embedding, job.userId);
}

/**
 * How long without a successful sync makes a replica stop taking searches: several sync intervals,
 * and at least 8 s, so that a busy machine's slower syncs do not turn every replica away at once
 * (4 s did, on 2 cores at a load average of 20). A host cut off for longer is stale when it comes back.
 */
export const syncStaleMs = (syncIntervalMs: number): number => Math.max(8000, 8 * syncIntervalMs);

/** The shard this process holds, or null with one shard. */
export function shardOfProcess(config: Config): ShardSpec | null {
  const { shards, shard } = config.search;
  if (shards <= 1) return null;
  if (shard >= shards) throw new Error(`SEARCH_SHARD ${shard} is not below SEARCH_SHARDS ${shards}`);
  return { index: shard, count: shards };
}

export async function startSearchWorker(config: Config, opts: { logger?: Logger } = {}): Promise<RunningSearchWorker> {
  const logger = opts.logger ?? createLogger({ level: config.runtime.logLevel, format: config.runtime.logFormat, name: 'search' });
  const db = createDb(config.database.url, Math.min(config.database.poolMax, 4), { bindModels: false });
  const keyRing = keyRingOf(config);
  const sealer = new HandoffSealer(keyRing);
  const shard = shardOfProcess(config);
  const replica = new IndexReplica(db, {
    ...(shard ? { shard } : {}),
    factory: config.search.indexFactory,
    nprobe: config.search.indexNprobe,
    syncIntervalMs: config.search.syncIntervalMs,
    snapshotDir: config.search.snapshotDir || null,
    rerankCandidates: config.search.rerankCandidates,
    exactCandidates: config.search.exactCandidates,
    snapshotCheck: config.search.snapshotCheck,
    maxBatch: config.search.maxBatch,
    retrainGrowth: config.search.retrainGrowth,
    pruneIntervalMs: config.search.pruneIntervalMs,
    replicaStaleMs: config.search.replicaStaleMs,
    keyRing,
    erasureMaxSeconds: config.search.erasureMaxSeconds,
    logger,
  });
  let runner: QueueRunner<'search'> | undefined;
  let consumer: { shard: ShardConsumer; redis: Redis[] } | undefined;
  let status: StatusServer | undefined;
  try {
    // Health answers (503 `starting`) while a large index builds.
    status = await startStatusServer(config.search.healthPort, config.http.host, {
      '/health': () => {
        const h = replica.health();
        return {
          status: h.status === 'ok' ? 200 : 503,
          body: { ...h, shard: shard ?? { index: 0, count: 1 }, jobs: runner?.stats.search ?? consumer?.shard.stats ?? null },
        };
      },
    });
    await replica.start();
    if (shard) {
      // A shard serves the broadcast stream of its shard count only, never the `search` queue: a
      // single-index search sent there must not meet a replica holding a part of the gallery.
      const target = redisTarget(config.redis);
      const redis = [bullConnection(target, { socketTimeout: STALLED_SOCKET_MS }), bullConnection(target, { socketTimeout: STALLED_SOCKET_MS })];
      for (const c of redis) c.on('error', () => {});
      const [blocking, plain] = redis as [Redis, Redis];
      consumer = {
        redis,
        shard: new ShardConsumer({
          blocking,
          redis: plain,
          handoff: new RedisFaceHandoff(plain, config.redis.prefix, sealer),
          replica,
          shard,
          redisPrefix: config.redis.prefix,
          concurrency: config.search.workerConcurrency,
          logger,
        }),
      };
      await consumer.shard.start();
    } else
      runner = await runQueues(
        config,
        ['search'],
        {
          search: (job, ctx) => searchHandler(replica, new RedisFaceHandoff(ctx.redis, config.redis.prefix, sealer), job),
        },
        {
          logger,
          concurrency: config.search.workerConcurrency,
          // A replica whose sync has not reached PostgreSQL for a while takes no search: the other
          // replicas serve them, rather than this one holding them until their deadline.
          canTakeJobs: () => replica.syncedWithin(syncStaleMs(config.search.syncIntervalMs)),
        },
      );
  } catch (e) {
    await consumer?.shard.close();
    consumer?.redis.forEach((c) => c.disconnect());
    await runner?.close();
    await status?.close();
    await replica.stop();
    await db.destroy();
    throw e;
  }
  logger.info({ url: status.url, ...replica.health() }, 'search worker ready');

  let closing: Promise<void> | undefined;
  return {
    url: status.url,
    close: () =>
      (closing ??= (async () => {
        await runner?.close();
        if (consumer) {
          await consumer.shard.close();
          await Promise.allSettled(consumer.redis.map((c) => c.quit().catch(() => c.disconnect())));
        }
        await replica.stop();
        await status!.close();
        await db.destroy();
      })()),
  };
}
