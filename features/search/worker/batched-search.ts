/**
 * The searches of a replica: `knn` jobs that are waiting together go to the engine in ONE call (up to
 * SEARCH_MAX_BATCH), after one catch-up to the largest `minSeq` among them (read-your-writes: the check
 * and the search happen in the same synchronous step); approximate FAISS types are re-scored exactly
 * from PostgreSQL. And `compare`, one user's canonical embedding read from PostgreSQL (always current).
 */
import { performance } from 'node:perf_hooks';
import { assertEmbedding, dot, normalised } from '../../../platform/face/embeddings.js';
import type { SearchHit, SearchResult } from '../../../platform/jobs/index.js';
import type { ChangeLogSource } from './change-log-source.js';
import { elapsed, type ReplicaState, type ReplicaStats } from './replica-state.js';

type KnnResult = Extract<SearchResult, { op: 'knn' }>;
type CompareResult = Extract<SearchResult, { op: 'compare' }>;

interface PendingSearch {
  query: Float32Array;
  k: number;
  minSeq: bigint;
  excludeUserId: string | null;
  t0: number;
  resolve: (r: KnnResult) => void;
  reject: (e: unknown) => void;
}

export interface BatchedSearchOptions {
  source: ChangeLogSource;
  engineVersion: string;
  /** Most knn searches in one engine call. */
  maxBatch: number;
  /** Candidates fetched per requested hit from an approximate FAISS index, re-scored from PostgreSQL. */
  refineFactor: number;
  stats: ReplicaStats;
  /** Runs `fn` on a state that has applied at least `minSeq`, in the same synchronous step as the check. */
  withAppliedAtLeast<T>(minSeq: bigint, fn: (s: ReplicaState) => T): Promise<T>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const clamp = (x: number) => Math.max(-1, Math.min(1, x));

export class BatchedSearch {
  private pending: PendingSearch[] = [];
  private flushing = false;

  constructor(private readonly opts: BatchedSearchOptions) {}

  /** The `knn` op: the k best live users for `embedding`, after applying every change up to `minSeq`. */
  knn(embedding: ArrayLike<number>, k: number, minSeq: string, excludeUserId: string | null = null): Promise<KnnResult> {
    const t0 = performance.now();
    try {
      assertEmbedding(embedding, 'query embedding');
      if (!Number.isInteger(k) || k < 1 || k > 1000) throw new RangeError('k must be an integer in 1..1000');
      if (!/^\d+$/.test(minSeq)) throw new RangeError('minSeq must be a decimal integer');
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise((resolve, reject) => {
      this.pending.push({ query: normalised(embedding), k, minSeq: BigInt(minSeq), excludeUserId, t0, resolve, reject });
      if (this.pending.length === 1 && !this.flushing) setImmediate(() => void this.flush());
    });
  }

  /** Fails every search still waiting (the replica is stopping). */
  rejectWaiting(e: Error): void {
    for (const p of this.pending.splice(0)) p.reject(e);
  }

  /** Sends the waiting searches to the engine, up to maxBatch per call, until none waits. */
  private async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.pending.length) {
        const batch = this.pending.splice(0, this.opts.maxBatch);
        try {
          await this.searchBatch(batch);
        } catch (e) {
          for (const p of batch) p.reject(e);
        }
        // Searches that arrived meanwhile form the next batch.
        if (this.pending.length) await new Promise((r) => setImmediate(r));
      }
    } finally {
      this.flushing = false;
    }
  }

  private async searchBatch(batch: PendingSearch[]): Promise<void> {
    const { stats, refineFactor } = this.opts;
    const minSeq = batch.reduce((m, p) => (p.minSeq > m ? p.minSeq : m), 0n);
    const { results, appliedSeq, size, exact } = await this.opts.withAppliedAtLeast(minSeq, (s) => {
      const exactEngine = s.engine.exact;
      // One more hit for a search that excludes a user, who may be among the best.
      const kk = Math.max(...batch.map((p) => (exactEngine ? p.k : p.k * refineFactor) + (p.excludeUserId ? 1 : 0)));
      return {
        results: s.engine.searchMany(
          batch.map((p) => p.query),
          kk,
        ),
        appliedSeq: s.appliedSeq,
        size: s.engine.size,
        exact: exactEngine,
      };
    });
    stats.batches++;
    stats.batchedSearches += batch.length;
    stats.largestBatch = Math.max(stats.largestBatch, batch.length);
    await Promise.all(
      batch.map(async (p, i) => {
        try {
          const found = results[i]!.filter((h) => h.userId !== p.excludeUserId);
          const hits = exact ? found.slice(0, p.k) : (await this.rescore(p.query, found)).slice(0, p.k);
          p.resolve({ op: 'knn', hits, appliedSeq: String(appliedSeq), indexSize: size, ms: elapsed(p.t0) });
        } catch (e) {
          p.reject(e);
        }
      }),
    );
  }

  /** Approximate FAISS types: exact cosines from PostgreSQL (a user removed meanwhile drops out). */
  private async rescore(q: Float32Array, hits: SearchHit[]): Promise<SearchHit[]> {
    if (hits.length === 0) return hits;
    const rows = await this.opts.source.currentRows(
      hits.map((h) => h.userId),
      this.opts.engineVersion,
    );
    return [...rows].map(([userId, v]) => ({ userId, score: clamp(dot(q, normalised(v))) })).sort((a, b) => b.score - a.score);
  }

  /** The `compare` op: cosine with the user's canonical embedding, read from PostgreSQL (always current). */
  async compare(embedding: ArrayLike<number>, userId: string): Promise<CompareResult> {
    const t0 = performance.now();
    assertEmbedding(embedding, 'embedding');
    const row = UUID.test(userId) ? await this.opts.source.readOne(userId) : undefined;
    if (!row) return { op: 'compare', score: null, reason: 'no_embedding', ms: elapsed(t0) };
    if (row.engineVersion !== this.opts.engineVersion) return { op: 'compare', score: null, reason: 'engine_version_mismatch', ms: elapsed(t0) };
    const score = clamp(dot(normalised(embedding), normalised(row.vector)));
    return { op: 'compare', score, ms: elapsed(t0) };
  }
}
