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
import { createLogger, type Logger } from '../../../platform/logger.js';
import { runQueues, type QueueRunner } from '../../../platform/worker-runtime/run-queue.js';
import { startStatusServer, type StatusServer } from '../../../platform/worker-runtime/status-server.js';
import { IndexReplica } from './replica.js';
import { keyRingOf } from '../../../platform/keys/templates.js';

export interface RunningSearchWorker {
  url: string;
  close(): Promise<void>;
}

/** One search job: its probe embedding taken (once) from beside the job, then the op on the replica. */
export async function searchHandler(replica: Pick<IndexReplica, 'knn' | 'compare'>, handoff: RedisFaceHandoff, job: SearchJob): Promise<SearchResult> {
  const embedding = await takeSearchEmbedding(handoff, job);
  return job.op === 'knn' ? replica.knn(embedding, job.k, job.minSeq, job.excludeUserId ?? null) : replica.compare(embedding, job.userId);
}

export async function startSearchWorker(config: Config, opts: { logger?: Logger } = {}): Promise<RunningSearchWorker> {
  const logger = opts.logger ?? createLogger({ level: config.runtime.logLevel, format: config.runtime.logFormat, name: 'search' });
  const db = createDb(config.database.url, Math.min(config.database.poolMax, 4), { bindModels: false });
  const keyRing = keyRingOf(config);
  const sealer = new HandoffSealer(keyRing);
  const replica = new IndexReplica(db, {
    factory: config.search.indexFactory,
    nprobe: config.search.indexNprobe,
    syncIntervalMs: config.search.syncIntervalMs,
    snapshotDir: config.search.snapshotDir || null,
    rerankCandidates: config.search.rerankCandidates,
    exactCandidates: config.search.exactCandidates,
    maxBatch: config.search.maxBatch,
    retrainGrowth: config.search.retrainGrowth,
    pruneIntervalMs: config.search.pruneIntervalMs,
    replicaStaleMs: config.search.replicaStaleMs,
    keyRing,
    erasureMaxSeconds: config.protection.erasureMaxSeconds,
    logger,
  });
  let runner: QueueRunner<'search'> | undefined;
  let status: StatusServer | undefined;
  try {
    // Health answers (503 `starting`) while a large index builds.
    status = await startStatusServer(config.search.healthPort, config.http.host, {
      '/health': () => {
        const h = replica.health();
        return { status: h.status === 'ok' ? 200 : 503, body: { ...h, jobs: runner?.stats.search ?? null } };
      },
    });
    await replica.start();
    runner = await runQueues(
      config,
      ['search'],
      {
        search: (job, ctx) => searchHandler(replica, new RedisFaceHandoff(ctx.redis, config.redis.prefix, sealer), job),
      },
      { logger, concurrency: config.search.workerConcurrency },
    );
  } catch (e) {
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
        await runner!.close();
        await replica.stop();
        await status!.close();
        await db.destroy();
      })()),
  };
}
