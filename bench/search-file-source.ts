/**
 * A ChangeLogSource over a dataset file instead of PostgreSQL: the bounded procedure for sizes whose
 * PostgreSQL load would take hours on this machine (10M rows are 21 GB of table and about 8 minutes
 * of inserts at best). The replica's code is unchanged: the same full build (sample first, pages, the
 * engine's builder, a snapshot written and opened), the same catch-up (an empty change log), the same
 * search job path. Only the rows come from `gallery.f32` (row r = user syntheticUserId(r)).
 */
import type { ChangeLogSource, FullRead, SourceRow } from '../features/search/worker/change-log-source.js';
import { openDataset, readGallery } from './search-data.js';
import { DIM, syntheticUserId } from './lib.js';

export class FileChangeLogSource implements ChangeLogSource {
  constructor(
    private readonly dir: string,
    private readonly id = 'file',
  ) {}
  async logId(): Promise<string> {
    return this.id;
  }
  async headSeq(): Promise<bigint> {
    return 0n;
  }
  async prunedThrough(): Promise<bigint> {
    return 0n;
  }
  async readAll(
    _engineVersion: string,
    opts: { firstRows: number; pageSize: number },
    onFirst: (rows: SourceRow[], total: number) => Promise<void> | void,
    onPage: (rows: SourceRow[]) => Promise<void> | void,
  ): Promise<FullRead> {
    const ds = openDataset(this.dir);
    let first: SourceRow[] | null = [];
    await readGallery(ds, opts.pageSize, async (r0, rows) => {
      const page: SourceRow[] = [];
      for (let i = 0; i < rows.length / DIM; i++) page.push({ userId: syntheticUserId(r0 + i), vector: rows.subarray(i * DIM, (i + 1) * DIM) });
      if (first) {
        first.push(...page);
        if (first.length >= opts.firstRows || r0 + page.length >= ds.n) {
          await onFirst(first, ds.n);
          first = null;
        }
      } else {
        await onPage(page);
      }
    });
    if (first) await onFirst(first, ds.n);
    return { seq: 0n, rows: ds.n, otherEngineRows: 0 };
  }
  async changesAfter(): Promise<{ prunedThrough: bigint; changes: never[] }> {
    return { prunedThrough: 0n, changes: [] };
  }
  async currentRows(): Promise<Map<string, Float32Array>> {
    return new Map();
  }
  async readOne(): Promise<undefined> {
    return undefined;
  }
  async reportPosition(): Promise<void> {}
  async forgetReplica(): Promise<void> {}
  async prune(): Promise<{ through: bigint; deleted: number }> {
    return { through: 0n, deleted: 0 };
  }
}
