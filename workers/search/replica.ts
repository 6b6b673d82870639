/**
 * One search replica: a VectorIndex kept in step with PostgreSQL (docs/vector-index.md).
 *
 * - Build: in one REPEATABLE READ snapshot, read the change log's head seq and every canonical
 *   embedding of the running engine version (training sample first, for types that need it), so the
 *   index holds exactly the state "after change `seq`". That seq is the replica's `appliedSeq`.
 * - Catch-up: read the changes after `appliedSeq` (in seq order, in batches), fetch the CURRENT rows of
 *   the users they name, apply them (row present: upsert; absent: remove), advance `appliedSeq` to the
 *   last change read. Applying the current state is idempotent, so a row newer than the change that
 *   led to it is harmless. embedding-store.ts makes seqs commit in order, so nothing can appear later
 *   below `appliedSeq`.
 * - Read-your-writes: a `knn` job carries `minSeq` (the head the API saw before enqueueing); the
 *   replica catches up to it before searching, in the same synchronous step as the search.
 * - Background sync every SEARCH_SYNC_INTERVAL_MS keeps an idle replica close to the head.
 * - Compaction: when tombstones pile up (or a fallback `Flat` index now has enough data to train the
 *   configured type), a new index is built from PostgreSQL beside the serving one, caught up, and
 *   swapped in; the serving index answers meanwhile.
 */
import type { Knex } from 'knex';
import { performance } from 'node:perf_hooks';
import { FACE_ENGINE_VERSION } from '../../shared/face-models.js';
import { assertEmbedding, decodeEmbedding, dot, normalised } from '../../shared/embeddings.js';
import type { SearchHit, SearchResult } from '../../shared/jobs/index.js';
import type { Logger } from '../../shared/logger.js';
import { VectorIndex, describeFactory, type IndexTemplate } from './vector-index.js';

export interface ReplicaOptions {
  factory: string;
  nprobe: number;
  logger: Logger;
  /** Background catch-up period; 0 disables it. */
  syncIntervalMs: number;
  /** Embeddings of other engine versions are not comparable and are left out. */
  engineVersion?: string;
  /** Rebuild when tombstones >= max(compactMinDead, compactDeadRatio * live). */
  compactMinDead?: number;
  compactDeadRatio?: number;
  /** Rows per page when reading canonical_embeddings. */
  pageSize?: number;
  /** Changes read per catch-up round trip. */
  changeBatch?: number;
  /** Candidates fetched per requested hit from an approximate index, re-scored exactly from PostgreSQL. */
  refineFactor?: number;
}

interface State {
  index: VectorIndex;
  appliedSeq: bigint;
  template: IndexTemplate;
  running?: Promise<void>;
  queued?: Promise<void>;
}

export interface BuildStats {
  at: string;
  ms: number;
  trainMs: number;
  rows: number;
  reason: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const elapsed = (t0: number) => Math.round((performance.now() - t0) * 10) / 10;

export class IndexReplica {
  private state: State | undefined;
  private rebuilding: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  readonly engineVersion: string;
  private readonly compactMinDead: number;
  private readonly compactDeadRatio: number;
  private readonly pageSize: number;
  private readonly changeBatch: number;
  private readonly refineFactor: number;
  /** Figures for /health and the benchmarks. */
  readonly stats = {
    lastBuild: undefined as BuildStats | undefined,
    builds: 0,
    catchUps: 0,
    changesApplied: 0,
    otherEngineRows: 0,
  };

  constructor(private readonly db: Knex, private readonly opts: ReplicaOptions) {
    describeFactory(opts.factory); // refuse an unusable factory string before any work
    this.engineVersion = opts.engineVersion ?? FACE_ENGINE_VERSION;
    this.compactMinDead = opts.compactMinDead ?? 1000;
    this.compactDeadRatio = opts.compactDeadRatio ?? 0.2;
    this.pageSize = opts.pageSize ?? 2000;
    this.changeBatch = opts.changeBatch ?? 5000;
    this.refineFactor = opts.refineFactor ?? 4;
  }

  get ready(): boolean {
    return this.state !== undefined;
  }

  get index(): VectorIndex {
    if (!this.state) throw new Error('the index is not built yet');
    return this.state.index;
  }

  get appliedSeq(): bigint {
    return this.state?.appliedSeq ?? -1n;
  }

  /** Builds the index from PostgreSQL, then starts the background sync. */
  async start(): Promise<void> {
    this.state = await this.build('start');
    await this.requestCatchUp(this.state);
    if (this.opts.syncIntervalMs > 0) {
      this.timer = setInterval(() => {
        if (this.state) this.requestCatchUp(this.state).catch((e) => this.opts.logger.warn({ err: errMessage(e) }, 'background catch-up failed'));
      }, this.opts.syncIntervalMs);
      this.timer.unref();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await Promise.allSettled([this.state?.running, this.state?.queued, this.rebuilding]);
  }

  /**
   * Builds a new index from one consistent snapshot. With a template (compaction) the trained empty
   * index is reused; without one, types that need training are trained on a sample of the rows.
   */
  async build(reason: string, template?: IndexTemplate): Promise<State> {
    const t0 = performance.now();
    let trainMs = 0;
    const { factory, nprobe } = this.opts;
    const info = describeFactory(factory);
    const state = await this.db.transaction(async (trx) => {
      await trx.raw('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
      const head = await trx('embeddingChanges').max({ seq: 'seq' }).first();
      const appliedSeq = BigInt(head?.seq ?? 0);
      const counts = await trx('canonicalEmbeddings')
        .select(trx.raw('count(*) filter (where engine_version = ?) as mine, count(*) filter (where engine_version <> ?) as other', [this.engineVersion, this.engineVersion]))
        .first();
      const total = Number(counts?.mine ?? 0);
      this.stats.otherEngineRows = Number(counts?.other ?? 0);

      let after: string | null = null;
      const page = async (limit: number) => {
        const q = trx('canonicalEmbeddings')
          .where({ engineVersion: this.engineVersion })
          .orderBy('userId')
          .limit(limit)
          .select('userId', 'embedding');
        if (after) q.where('userId', '>', after);
        const rows = (await q) as { userId: string; embedding: Buffer }[];
        if (rows.length) after = rows[rows.length - 1]!.userId;
        return rows.map((r) => ({ userId: r.userId, vector: decodeEmbedding(r.embedding) }));
      };

      let index: VectorIndex;
      let first: { userId: string; vector: Float32Array }[] = [];
      if (template) {
        index = VectorIndex.fromTemplate({ factory, nprobe }, template);
      } else {
        const probe = VectorIndex.create({ factory, nprobe: 1 }, []);
        if (probe.fallback && total >= info.minTrain) {
          // User ids are random (gen_random_uuid), so the first rows in id order are a uniform sample.
          first = await page(Math.min(total, info.trainSample));
          const t1 = performance.now();
          index = VectorIndex.create({ factory, nprobe }, first.map((r) => r.vector));
          trainMs = elapsed(t1);
        } else {
          index = VectorIndex.create({ factory, nprobe }, []);
        }
      }
      const built: State = { index, appliedSeq, template: index.template() };
      // The next page is read while this one is added (PostgreSQL works while FAISS copies).
      let next: ReturnType<typeof page> | null = first.length < info.trainSample && first.length > 0 ? null : page(this.pageSize);
      for (let i = 0; i < first.length; i += this.pageSize) index.upsertMany(first.slice(i, i + this.pageSize));
      first.length = 0; // the training page is indexed: let it go before the long build
      while (next) {
        const rows = await next;
        next = rows.length === this.pageSize ? page(this.pageSize) : null;
        index.upsertMany(rows);
      }
      return built;
    });
    this.stats.builds++;
    this.stats.lastBuild = { at: new Date().toISOString(), ms: elapsed(t0), trainMs, rows: state.index.size, reason };
    this.opts.logger.info(
      { reason, size: state.index.size, appliedSeq: String(state.appliedSeq), factory, effectiveFactory: state.index.effectiveFactory, nprobe: state.index.nprobe, ms: elapsed(t0), trainMs },
      'vector index built',
    );
    return state;
  }

  /**
   * Resolves once a catch-up that STARTED AFTER this call has finished, so it has seen every change
   * committed before the call. Concurrent callers share runs.
   */
  private requestCatchUp(s: State): Promise<void> {
    if (s.queued) return s.queued;
    const run = () => {
      const p = this.runCatchUp(s).finally(() => {
        if (s.running === p) s.running = undefined;
      });
      s.running = p;
      return p;
    };
    if (!s.running) return run();
    const queued: Promise<void> = s.running
      .catch(() => {})
      .then(() => {
        s.queued = undefined;
        return run();
      });
    s.queued = queued;
    return queued;
  }

  private async runCatchUp(s: State): Promise<void> {
    this.stats.catchUps++;
    for (;;) {
      const changes = (await this.db('embeddingChanges')
        .where('seq', '>', String(s.appliedSeq))
        .orderBy('seq')
        .limit(this.changeBatch)
        .select('seq', 'userId')) as { seq: string; userId: string }[];
      if (changes.length === 0) break;
      const ids = [...new Set(changes.map((c) => c.userId))];
      const rows = (await this.db('canonicalEmbeddings')
        .whereIn('userId', ids)
        .select('userId', 'embedding', 'engineVersion')) as { userId: string; embedding: Buffer; engineVersion: string }[];
      const current = new Map(rows.filter((r) => r.engineVersion === this.engineVersion).map((r) => [r.userId, r.embedding]));
      // Synchronous from here: no search sees a half-applied batch.
      const upserts: { userId: string; vector: Float32Array }[] = [];
      for (const id of ids) {
        const bytes = current.get(id);
        if (bytes) upserts.push({ userId: id, vector: decodeEmbedding(bytes) });
        else s.index.remove(id);
      }
      s.index.upsertMany(upserts);
      s.appliedSeq = BigInt(changes[changes.length - 1]!.seq);
      this.stats.changesApplied += changes.length;
      if (changes.length < this.changeBatch) break;
    }
    if (s === this.state) this.maybeCompact(s);
  }

  private maybeCompact(s: State): void {
    if (this.rebuilding || this.stopped) return;
    const { index } = s;
    const info = describeFactory(this.opts.factory);
    const tooManyDead = index.dead > 0 && index.dead >= Math.max(this.compactMinDead, this.compactDeadRatio * index.size);
    const canTrainNow = index.fallback && index.size >= info.minTrain;
    if (tooManyDead || canTrainNow) {
      void this.rebuild(canTrainNow ? 'train' : 'compact').catch((e) => this.opts.logger.error({ err: errMessage(e) }, 'vector index rebuild failed'));
    }
  }

  /**
   * Builds a fresh index from PostgreSQL beside the serving one (reusing the trained template unless
   * the serving index is a fallback), catches it up, and swaps it in. Searches keep using the old one
   * until the swap; a search always checks `appliedSeq` of whichever index it reads.
   */
  rebuild(reason = 'compact'): Promise<void> {
    this.rebuilding ??= (async () => {
      try {
        const current = this.state;
        const template = current && !current.index.fallback ? current.template : undefined;
        const next = await this.build(reason, template);
        await this.requestCatchUp(next);
        if (!this.stopped) this.state = next;
      } finally {
        this.rebuilding = undefined;
      }
    })();
    return this.rebuilding;
  }

  /**
   * Runs `fn` on an index that has applied at least `minSeq`, in the same synchronous step as the
   * check (a swap or a later change cannot slip in between).
   */
  async withAppliedAtLeast<T>(minSeq: bigint, fn: (s: State) => T): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const s = this.state;
      if (!s) throw new Error('the index is not built yet');
      if (s.appliedSeq >= minSeq) return fn(s);
      if (attempt >= 3) {
        throw new Error(`change seq ${minSeq} is not in the change log (applied ${s.appliedSeq}): the API and this worker use different databases?`);
      }
      await this.requestCatchUp(s);
    }
  }

  /** The `knn` op: the k best live users for `embedding`, after applying every change up to `minSeq`. */
  async knn(embedding: number[], k: number, minSeq: string): Promise<Extract<SearchResult, { op: 'knn' }>> {
    const t0 = performance.now();
    assertEmbedding(embedding, 'query embedding');
    if (!Number.isInteger(k) || k < 1 || k > 1000) throw new RangeError('k must be an integer in 1..1000');
    if (!/^\d+$/.test(minSeq)) throw new RangeError('minSeq must be a decimal integer');
    const { hits, appliedSeq, size, exact } = await this.withAppliedAtLeast(BigInt(minSeq), (s) => ({
      hits: s.index.search(embedding, s.index.exact ? k : k * this.refineFactor),
      appliedSeq: s.appliedSeq,
      size: s.index.size,
      exact: s.index.exact,
    }));
    const final = exact ? hits : (await this.rescore(embedding, hits)).slice(0, k);
    return { op: 'knn', hits: final, appliedSeq: String(appliedSeq), indexSize: size, ms: elapsed(t0) };
  }

  /**
   * Approximate index: exact cosines from the stored embeddings (PostgreSQL is the truth; a user
   * removed meanwhile drops out), best first.
   */
  private async rescore(embedding: number[], hits: SearchHit[]): Promise<SearchHit[]> {
    if (hits.length === 0) return hits;
    const q = normalised(embedding);
    const rows = (await this.db('canonicalEmbeddings')
      .whereIn('userId', hits.map((h) => h.userId))
      .where({ engineVersion: this.engineVersion })
      .select('userId', 'embedding')) as { userId: string; embedding: Buffer }[];
    return rows
      .map((r) => ({ userId: r.userId, score: clamp(dot(q, normalised(decodeEmbedding(r.embedding)))) }))
      .sort((a, b) => b.score - a.score);
  }

  /** The `compare` op: cosine with the user's canonical embedding, read from PostgreSQL (always current). */
  async compare(embedding: number[], userId: string): Promise<Extract<SearchResult, { op: 'compare' }>> {
    const t0 = performance.now();
    assertEmbedding(embedding, 'embedding');
    const row = UUID.test(userId)
      ? ((await this.db('canonicalEmbeddings').where({ userId }).first('embedding', 'engineVersion')) as { embedding: Buffer; engineVersion: string } | undefined)
      : undefined;
    if (!row) return { op: 'compare', score: null, reason: 'no_embedding', ms: elapsed(t0) };
    if (row.engineVersion !== this.engineVersion) return { op: 'compare', score: null, reason: 'engine_version_mismatch', ms: elapsed(t0) };
    const score = clamp(dot(normalised(embedding), normalised(decodeEmbedding(row.embedding))));
    return { op: 'compare', score, ms: elapsed(t0) };
  }

  health() {
    const s = this.state;
    return {
      status: s ? ('ok' as const) : ('starting' as const),
      size: s?.index.size ?? 0,
      appliedSeq: s ? String(s.appliedSeq) : null,
      factory: this.opts.factory,
      effectiveFactory: s?.index.effectiveFactory ?? null,
      exact: s?.index.exact ?? null,
      nprobe: s?.index.nprobe ?? null,
      tombstones: s?.index.dead ?? 0,
      rebuilding: this.rebuilding !== undefined,
      engineVersion: this.engineVersion,
      otherEngineRows: this.stats.otherEngineRows,
      lastBuild: this.stats.lastBuild ?? null,
    };
  }
}

const clamp = (x: number) => Math.max(-1, Math.min(1, x));
const errMessage = (e: unknown) => (e instanceof Error ? e.message : String(e));
