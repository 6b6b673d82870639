/**
 * Canonical embeddings and their change log, writer and reader together (SPEC 6, docs/vector-index.md).
 *
 * Every write changes the row in `canonical_embeddings` AND appends to the change log
 * `embedding_changes` in one transaction, after taking a transaction-scoped advisory lock. The lock
 * makes change sequences commit in sequence order: a search replica that has seen seq N can never
 * later receive a smaller seq that committed late, so "applied up to N" is a safe cursor, and a
 * search that carries `minSeq` = the largest committed seq sees every write that answered before it.
 *
 * Called inside a caller's transaction (`trx`), the lock is held until that transaction ends: do the
 * embedding write last, and keep the rest of that transaction short.
 */
import type { Knex } from 'knex';
import { assertEmbedding } from '../../platform/face/embeddings.js';
import { KeyRing } from '../../platform/keys/key-ring.js';
import { openTemplate, processKeyRing, sealTemplate, sealTemplateBytes } from '../../platform/keys/templates.js';
import { CanonicalEmbedding, EmbeddingChange } from '../../models/index.js';
import { Repository, type Db } from '../../platform/database/unit-of-work.js';

export type CanonicalSource = CanonicalEmbedding['source'];

/** Key of the advisory lock that serialises change-log appends (pg_advisory_xact_lock(int4, int4)). */
export const EMBEDDING_CHANGES_LOCK = [0x66616365 /* 'face' */, 6 /* SPEC section 6 */] as const;

export interface StoredEmbedding {
  userId: string;
  /** The decrypted template (plaintext lives only in memory: the row holds a key-ring blob). */
  embedding: Float32Array;
  engineVersion: string;
}

/**
 * The `embedding` column holds a key-ring blob (platform/keys/templates.ts) bound to the user id, and
 * `key_id` names the key that sealed it (a rotation finds the rows still under an old key by index).
 */
export class EmbeddingsRepository extends Repository {
  constructor(
    db: Knex,
    private readonly ring: KeyRing = processKeyRing(),
  ) {
    super(db);
  }

  private async appendChange(trx: Knex.Transaction, userId: string, op: EmbeddingChange['op']): Promise<string> {
    const [row] = await trx(EmbeddingChange.tableName).insert({ userId, op }).returning('seq');
    return String((row as { seq: string | number }).seq);
  }

  private async lockChanges(trx: Knex.Transaction): Promise<void> {
    await trx.raw('SELECT pg_advisory_xact_lock(?, ?)', [...EMBEDDING_CHANGES_LOCK]);
  }

  // ---- writer ------------------------------------------------------------------------------

  /**
   * Sets the user's canonical embedding (512 finite numbers, sealed under the active key) and logs the
   * change. Returns the change sequence. `qualityScore`: the capture quality
   * (0..100) of the capture it came from, null when unknown (the /verify/self refresh rule compares
   * against it). `alongside`: one more data-modifying statement (an INSERT, as `toSQL()` gives it, with
   * `?` placeholders) written in the same statement, so both land or neither (the /verify/self
   * refresh's audit row).
   */
  async upsert(
    userId: string,
    embedding: ArrayLike<number>,
    source: CanonicalSource,
    engineVersion: string,
    trx?: Knex.Transaction,
    qualityScore: number | null = null,
    alongside?: { sql: string; bindings: readonly Knex.Value[] },
  ): Promise<{ seq: string }> {
    assertEmbedding(embedding); // validates before any lock is taken
    const blob = sealTemplate(this.ring, userId, embedding);
    // One statement, one round trip: the lock, the row and its change-log entry (and `alongside`). The
    // row is selected FROM the lock's result, so the lock is taken before the row is written and before
    // the entry's seq is drawn, and it is held until the statement's transaction commits: its own (no
    // BEGIN/COMMIT of ours, three round trips fewer on the critical path of every link and /verify/self
    // refresh) or the caller's `trx`. An upsert always returns its row: exactly one entry is appended.
    const { rows } = (await this.on(trx).raw(
      `WITH lock AS (SELECT pg_advisory_xact_lock(?, ?)),${alongside ? ` alongside AS (${alongside.sql}),` : ''}
       up AS (
         INSERT INTO canonical_embeddings (user_id, embedding, key_id, source, engine_version, quality_score, updated_at)
         SELECT ?::uuid, ?::bytea, ?::text, ?::text, ?::text, ?::smallint, now() FROM lock
         ON CONFLICT (user_id) DO UPDATE SET embedding = EXCLUDED.embedding, key_id = EXCLUDED.key_id, source = EXCLUDED.source,
           engine_version = EXCLUDED.engine_version, quality_score = EXCLUDED.quality_score, updated_at = EXCLUDED.updated_at
         RETURNING user_id
       )
       INSERT INTO embedding_changes (user_id, op) SELECT user_id, 'upsert' FROM up RETURNING seq`,
      [...EMBEDDING_CHANGES_LOCK, ...(alongside?.bindings ?? []), userId, blob, this.ring.activeKeyId, source, engineVersion, qualityScore],
    )) as { rows: { seq: string | number }[] };
    if (rows.length !== 1) throw new Error(`canonical embedding upsert appended ${rows.length} change-log entries`);
    return { seq: String(rows[0]!.seq) };
  }

  /**
   * Removes the user's canonical embedding and logs the removal (also when there was none, so that a
   * replica holding a stale copy drops it). Once this returns, no search on any replica returns the user.
   */
  async remove(userId: string, trx?: Knex.Transaction): Promise<{ seq: string; removed: boolean }> {
    return this.transaction(async (t) => {
      await this.lockChanges(t);
      const removed = await t(CanonicalEmbedding.tableName).where({ userId }).del();
      return { seq: await this.appendChange(t, userId, 'delete'), removed: removed > 0 };
    }, trx);
  }

  // ---- reader ------------------------------------------------------------------------------

  /**
   * The largest committed change sequence ('0' before the first write): what a search must have applied
   * to see every write that has answered so far. Reads the primary key's last entry (an index-only probe).
   */
  async currentSeq(trx?: Db): Promise<string> {
    const row = await this.on(trx)(EmbeddingChange.tableName).max({ seq: 'seq' }).first();
    return row?.seq == null ? '0' : String(row.seq);
  }

  /** Changes after `seq`, oldest first (a replica's catch-up). */
  async changesAfter(seq: string, limit: number, trx?: Db): Promise<{ seq: string; userId: string }[]> {
    return this.on(trx)(EmbeddingChange.tableName).where('seq', '>', seq).orderBy('seq').limit(limit).select('seq', 'userId');
  }

  async exists(userId: string, trx?: Db): Promise<boolean> {
    return Boolean(await CanonicalEmbedding.query(this.on(trx)).findById(userId).select('userId'));
  }

  /** Whether the user has a canonical embedding, and the capture quality it was stored with (null: unknown). */
  async enrolment(userId: string, trx?: Db): Promise<{ qualityScore: number | null } | undefined> {
    // A plain query, not objection's: read on every /verify/self, where the model layer's cost showed.
    return this.on(trx)(CanonicalEmbedding.tableName).where({ userId }).first('qualityScore');
  }

  /**
   * The enrolment and the template in one read (/verify/self: the comparison needs both, and one
   * statement costs the web process half of two). undefined: the user has no canonical embedding.
   */
  async enrolmentWithTemplate(userId: string, trx?: Db): Promise<{ qualityScore: number | null; stored: StoredEmbedding } | undefined> {
    const row = await this.on(trx)(CanonicalEmbedding.tableName).where({ userId }).first('userId', 'embedding', 'engineVersion', 'qualityScore');
    return row ? { qualityScore: row.qualityScore, stored: this.open(row) } : undefined;
  }

  private open(row: { userId: string; embedding: Buffer; engineVersion: string }): StoredEmbedding {
    return { userId: row.userId, embedding: openTemplate(this.ring, row.userId, row.embedding), engineVersion: row.engineVersion };
  }

  /** What is held about the user's template, without the template (their data export). */
  async describe(userId: string, trx?: Db): Promise<Pick<CanonicalEmbedding, 'source' | 'engineVersion' | 'qualityScore' | 'updatedAt'> | undefined> {
    return CanonicalEmbedding.query(this.on(trx)).findById(userId).select('source', 'engineVersion', 'qualityScore', 'updatedAt');
  }

  async find(userId: string, trx?: Db): Promise<StoredEmbedding | undefined> {
    const row = await this.on(trx)(CanonicalEmbedding.tableName).where({ userId }).first('userId', 'embedding', 'engineVersion');
    return row ? this.open(row) : undefined;
  }

  /** The stored embeddings of some users (of one engine version, when given). */
  async findMany(userIds: string[], opts: { engineVersion?: string } = {}, trx?: Db): Promise<StoredEmbedding[]> {
    const q = this.on(trx)(CanonicalEmbedding.tableName).whereIn('userId', userIds);
    if (opts.engineVersion) q.where({ engineVersion: opts.engineVersion });
    return (await q.select('userId', 'embedding', 'engineVersion')).map((r) => this.open(r));
  }

  /** One page of an engine version's embeddings by user id (an index build reads them all in pages). */
  async page(engineVersion: string, after: string | null, limit: number, trx?: Db): Promise<{ userId: string; embedding: Float32Array }[]> {
    const q = this.on(trx)(CanonicalEmbedding.tableName).where({ engineVersion }).orderBy('userId').limit(limit).select('userId', 'embedding', 'engineVersion');
    if (after) q.where('userId', '>', after);
    return (await q).map((r) => this.open(r));
  }

  // ---- key rotation --------------------------------------------------------------------------

  /**
   * Re-seals up to `limit` templates still sealed by another key than the active one (or in the layout
   * of earlier versions: `key_id` `v1:<kid>`), and says how many it did. Each batch is its own short transaction that skips rows a writer holds (a concurrent
   * upsert seals under the active key anyway), so the service keeps running; the plaintext does not
   * change, so no change-log entry is written and no replica rebuilds. Resumable by construction: the
   * rows still to do are exactly those whose key_id is not the active one.
   */
  async rotateBatch(limit: number): Promise<{ rotated: number }> {
    return this.db.transaction(async (t) => {
      const rows = (await t(CanonicalEmbedding.tableName)
        .whereNot({ keyId: this.ring.activeKeyId })
        .orderBy('userId')
        .limit(limit)
        .forUpdate()
        .skipLocked()
        .select('userId', 'embedding')) as { userId: string; embedding: Buffer }[];
      for (const r of rows) {
        const plain = this.ring.open('templates', r.embedding, r.userId);
        await t(CanonicalEmbedding.tableName)
          .where({ userId: r.userId })
          .update({ embedding: sealTemplateBytes(this.ring, r.userId, plain), keyId: this.ring.activeKeyId });
        plain.fill(0);
      }
      return { rotated: rows.length };
    });
  }

  /** Templates per sealing key (what a rotation has left, and when an old key can be dropped). */
  async countByKey(trx?: Db): Promise<Record<string, number>> {
    const rows = (await this.on(trx)(CanonicalEmbedding.tableName).select('keyId').count({ n: '*' }).groupBy('keyId')) as {
      keyId: string;
      n: string | number;
    }[];
    return Object.fromEntries(rows.map((r) => [r.keyId, Number(r.n)]));
  }

  /** Rows of this engine version, and of any other (a replica reports the latter). */
  async countByEngine(engineVersion: string, trx?: Db): Promise<{ mine: number; other: number }> {
    const db = this.on(trx);
    const row = await db(CanonicalEmbedding.tableName)
      .select(
        db.raw('count(*) filter (where engine_version = ?) as mine, count(*) filter (where engine_version <> ?) as other', [engineVersion, engineVersion]),
      )
      .first();
    return { mine: Number(row?.mine ?? 0), other: Number(row?.other ?? 0) };
  }
}

// For scripts, benchmarks and tests that hold a knex rather than the web process's graph.
export const upsertCanonical = (db: Knex, ...args: Parameters<EmbeddingsRepository['upsert']>) => new EmbeddingsRepository(db).upsert(...args);
export const removeCanonical = (db: Knex, userId: string, trx?: Knex.Transaction) => new EmbeddingsRepository(db).remove(userId, trx);
export const currentChangeSeq = (db: Knex) => new EmbeddingsRepository(db).currentSeq();
