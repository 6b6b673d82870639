/**
 * Every SQL statement of the search replicas, behind one small interface (ChangeLogSource), so that it
 * can move into the canonical-embeddings repository (shared/repositories/) unchanged in meaning.
 *
 * Tables: canonical_embeddings (the truth), embedding_changes (the change log, written by
 * features/face/embeddings-repository.ts), search_state and search_replicas (migration 20261123000100_search_replicas).
 */
import type { Knex } from 'knex';
import type { KeyRing } from '../../../platform/keys/key-ring.js';
import { openTemplate, processKeyRing } from '../../../platform/keys/templates.js';
import { shardSql, type ShardSpec } from '../../../platform/jobs/search-shards.js';

export interface SourceRow {
  userId: string;
  vector: Float32Array;
}

export interface Change {
  seq: bigint;
  userId: string;
}

export interface FullRead {
  /** The change-log head the rows reflect (one REPEATABLE READ snapshot). */
  seq: bigint;
  rows: number;
  otherEngineRows: number;
}

export interface ChangeLogSource {
  /**
   * The lineage of this change log (a snapshot of another lineage is never loaded): a random id made at
   * migration time plus the database's oid, so a cloned or restored database never takes the
   * original's snapshots.
   */
  logId(): Promise<string>;
  headSeq(): Promise<bigint>;
  prunedThrough(): Promise<bigint>;
  /**
   * Reads every embedding of `engineVersion` in one consistent snapshot, in user-id order (ids are
   * random, so the first rows are a uniform sample): `onFirst` gets the first `firstRows` rows
   * (plus the total), then `onPage` every later page.
   */
  readAll(
    engineVersion: string,
    opts: { firstRows: number; pageSize: number },
    onFirst: (rows: SourceRow[], total: number) => Promise<void> | void,
    onPage: (rows: SourceRow[]) => Promise<void> | void,
  ): Promise<FullRead>;
  /** Changes after `seq`, in seq order, and the pruned point of the same instant. */
  changesAfter(seq: bigint, limit: number): Promise<{ prunedThrough: bigint; changes: Change[] }>;
  /** The current rows of these users, of `engineVersion` (absent: removed or another version). */
  currentRows(userIds: readonly string[], engineVersion: string): Promise<Map<string, Float32Array>>;
  /** One user's canonical embedding (for compare). */
  readOne(userId: string): Promise<{ vector: Float32Array; engineVersion: string } | undefined>;
  /** Records this replica's position (and the seq of the snapshot it can restart from). */
  reportPosition(replicaId: string, appliedSeq: bigint, snapshotSeq: bigint | null): Promise<void>;
  forgetReplica(replicaId: string): Promise<void>;
  /**
   * Deletes the changes every fresh replica has applied and can restart without (min over replicas
   * updated within `staleMs` of min(applied, snapshot)), except the newest change (the API reads
   * max(seq) as its minSeq); returns the new pruned point.
   */
  prune(staleMs: number): Promise<{ through: bigint; deleted: number }>;
}

/**
 * Templates are sealed at rest (platform/keys/templates.ts): this source decrypts each row as it is
 * read, so a replica's index holds plaintext only in memory.
 */
export class PgChangeLogSource implements ChangeLogSource {
  /**
   * With a `shard` of several, the source is that shard's view: its lineage is its own (so a shard
   * never opens another shard's or a single index's snapshot), a full build reads only its rows, and
   * the current rows of a change name only its users (a change of another shard's user then reads as
   * absent: a no-op removal, and `appliedSeq` still advances past it).
   */
  private readonly shard: ShardSpec | null;

  constructor(
    private readonly db: Knex,
    private readonly ring: KeyRing = processKeyRing(),
    shard?: ShardSpec | null,
  ) {
    this.shard = shard && shard.count > 1 ? shard : null;
  }

  /** ` AND <the row is this shard's>` and its bindings (nothing without shards). */
  private shardFilter(column = 'user_id'): { sql: string; bindings: number[] } {
    return this.shard ? { sql: ` AND ${shardSql(column)} = ?`, bindings: [this.shard.count, this.shard.index] } : { sql: '', bindings: [] };
  }

  async logId(): Promise<string> {
    const lineage = await this.baseLogId();
    return this.shard ? `${lineage}-s${this.shard.index}of${this.shard.count}` : lineage;
  }

  private async baseLogId(): Promise<string> {
    const r = await this.db.raw(
      `SELECT log_id::text || '-' || (SELECT oid FROM pg_database WHERE datname = current_database())::text AS lid FROM search_state WHERE id = 1`,
    );
    const id = r.rows[0]?.lid as string | undefined;
    if (!id) throw new Error('search_state is empty: run the migrations');
    return id;
  }

  async headSeq(): Promise<bigint> {
    const r = await this.db.raw('SELECT coalesce(max(seq), 0) AS seq FROM embedding_changes');
    return BigInt(r.rows[0].seq);
  }

  async prunedThrough(): Promise<bigint> {
    const r = await this.db.raw('SELECT pruned_through AS pt FROM search_state WHERE id = 1');
    return BigInt(r.rows[0]?.pt ?? 0);
  }

  async readAll(
    engineVersion: string,
    opts: { firstRows: number; pageSize: number },
    onFirst: (rows: SourceRow[], total: number) => Promise<void> | void,
    onPage: (rows: SourceRow[]) => Promise<void> | void,
  ): Promise<FullRead> {
    const f = this.shardFilter();
    return this.db.transaction(async (trx) => {
      await trx.raw('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
      const head = await trx.raw('SELECT coalesce(max(seq), 0) AS seq FROM embedding_changes');
      const counts = await trx.raw(
        `SELECT count(*) FILTER (WHERE engine_version = ?) AS mine, count(*) FILTER (WHERE engine_version <> ?) AS other FROM canonical_embeddings WHERE true${f.sql}`,
        [engineVersion, engineVersion, ...f.bindings],
      );
      const total = Number(counts.rows[0].mine);
      let after: string | null = null;
      let read = 0;
      const page = async (limit: number): Promise<SourceRow[]> => {
        const r = after
          ? await trx.raw(
              `SELECT user_id AS uid, embedding AS emb FROM canonical_embeddings WHERE engine_version = ? AND user_id > ?${f.sql} ORDER BY user_id LIMIT ?`,
              [engineVersion, after, ...f.bindings, limit],
            )
          : await trx.raw(`SELECT user_id AS uid, embedding AS emb FROM canonical_embeddings WHERE engine_version = ?${f.sql} ORDER BY user_id LIMIT ?`, [
              engineVersion,
              ...f.bindings,
              limit,
            ]);
        const rows = r.rows as { uid: string; emb: Buffer }[];
        if (rows.length) after = rows[rows.length - 1]!.uid;
        read += rows.length;
        return rows.map((x) => ({ userId: x.uid, vector: openTemplate(this.ring, x.uid, x.emb) }));
      };
      const first = await page(Math.max(1, opts.firstRows));
      await onFirst(first, total);
      if (first.length === Math.max(1, opts.firstRows)) {
        // The next page is read while this one is indexed (PostgreSQL works while the engine encodes).
        let next: Promise<SourceRow[]> | null = page(opts.pageSize);
        while (next) {
          const rows: SourceRow[] = await next;
          next = rows.length === opts.pageSize ? page(opts.pageSize) : null;
          if (rows.length) await onPage(rows);
        }
      }
      return { seq: BigInt(head.rows[0].seq), rows: read, otherEngineRows: Number(counts.rows[0].other) };
    });
  }

  async changesAfter(seq: bigint, limit: number): Promise<{ prunedThrough: bigint; changes: Change[] }> {
    const r = await this.db.raw(
      `SELECT s.pruned_through AS pt, c.seq, c.user_id AS uid
         FROM search_state s
         LEFT JOIN LATERAL (SELECT seq, user_id FROM embedding_changes WHERE seq > ? ORDER BY seq LIMIT ?) c ON true
        WHERE s.id = 1`,
      [String(seq), limit],
    );
    const rows = r.rows as { pt: string; seq: string | null; uid: string | null }[];
    const prunedThrough = BigInt(rows[0]?.pt ?? 0);
    const changes = rows.filter((x) => x.seq !== null).map((x) => ({ seq: BigInt(x.seq!), userId: x.uid! }));
    return { prunedThrough, changes };
  }

  async currentRows(userIds: readonly string[], engineVersion: string): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>();
    if (userIds.length === 0) return out;
    // One parameter holding the whole id list (knex would expand a JS array into one parameter each).
    const f = this.shardFilter();
    const r = await this.db.raw(
      `SELECT user_id AS uid, embedding AS emb FROM canonical_embeddings WHERE user_id = ANY(?::uuid[]) AND engine_version = ?${f.sql}`,
      [`{${userIds.join(',')}}`, engineVersion, ...f.bindings],
    );
    for (const x of r.rows as { uid: string; emb: Buffer }[]) out.set(x.uid, openTemplate(this.ring, x.uid, x.emb));
    return out;
  }

  async readOne(userId: string): Promise<{ vector: Float32Array; engineVersion: string } | undefined> {
    const r = await this.db.raw('SELECT embedding AS emb, engine_version AS ev FROM canonical_embeddings WHERE user_id = ?', [userId]);
    const row = r.rows[0] as { emb: Buffer; ev: string } | undefined;
    return row ? { vector: openTemplate(this.ring, userId, row.emb), engineVersion: row.ev } : undefined;
  }

  async reportPosition(replicaId: string, appliedSeq: bigint, snapshotSeq: bigint | null): Promise<void> {
    await this.db.raw(
      `INSERT INTO search_replicas (replica_id, applied_seq, snapshot_seq, updated_at) VALUES (?, ?, ?, now())
       ON CONFLICT (replica_id) DO UPDATE SET applied_seq = excluded.applied_seq, snapshot_seq = excluded.snapshot_seq, updated_at = now()`,
      [replicaId, String(appliedSeq), snapshotSeq === null ? null : String(snapshotSeq)],
    );
  }

  async forgetReplica(replicaId: string): Promise<void> {
    await this.db.raw('DELETE FROM search_replicas WHERE replica_id = ?', [replicaId]);
  }

  async prune(staleMs: number): Promise<{ through: bigint; deleted: number }> {
    return this.db.transaction(async (trx) => {
      // One pruner at a time (the same lock id space as the embeddings repository's writers, another key).
      await trx.raw('SELECT pg_advisory_xact_lock(1717658469, 7)');
      const b = await trx.raw(
        `SELECT min(least(applied_seq, coalesce(snapshot_seq, applied_seq))) AS bound
           FROM search_replicas WHERE updated_at > now() - (? * interval '1 millisecond')`,
        [staleMs],
      );
      const state = await trx.raw('SELECT pruned_through AS pt FROM search_state WHERE id = 1 FOR UPDATE');
      const current = BigInt(state.rows[0].pt);
      const bound = b.rows[0]?.bound;
      if (bound === null || bound === undefined || BigInt(bound) <= current) return { through: current, deleted: 0 };
      const through = BigInt(bound);
      // The newest change always stays: the API's minSeq is max(seq) of this table (the embeddings repository's
      // currentChangeSeq), which must not fall back below the writes that have answered.
      const del = await trx.raw('DELETE FROM embedding_changes WHERE seq <= ? AND seq < (SELECT max(seq) FROM embedding_changes)', [String(through)]);
      await trx.raw('UPDATE search_state SET pruned_through = ? WHERE id = 1', [String(through)]);
      return { through, deleted: del.rowCount ?? 0 };
    });
  }
}
