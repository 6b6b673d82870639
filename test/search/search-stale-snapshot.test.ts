/**
 * A search replica stopped during an erasure keeps, in its own snapshot directory, a snapshot written
 * before the removal: the erasure's receipt does not wait for it (it is not running). When it starts
 * again, that snapshot is rewritten past the removal and deleted before the replica serves, so no
 * snapshot on its disk holds the erased vector (docs/data-protection.md).
 */
import test from 'ava';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { currentChangeSeq, removeCanonical, upsertCanonical } from '../../features/face/embeddings-repository.js';
import { IndexReplica } from '../../features/search/worker/replica.js';
import { SnapshotStore, type SnapshotMeta } from '../../features/search/worker/snapshot-store.js';
import { snapshotUserIds } from '../../features/search/worker/sketch-engine.js';
import { createDb } from '../../platform/database/db.js';
import { FACE_ENGINE_VERSION } from '../../platform/face/face-models.js';
import { processKeyRing } from '../../platform/keys/templates.js';
import { createLogger } from '../../platform/logger.js';
import { useHarness } from '../helpers/harness.js';
import { newConsumer } from '../helpers/principals.js';
import { rng } from '../helpers/vectors.js';

const h = useHarness(test);

function unit(seed: number): number[] {
  const r = rng(seed);
  const v = Array.from({ length: 512 }, () => r() - 0.5);
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}

/** The user ids of every snapshot in `dir`, with its seq. */
async function snapshotsIn(dir: string): Promise<{ seq: bigint; ids: string[] }[]> {
  const store = new SnapshotStore(dir, processKeyRing());
  const out: { seq: bigint; ids: string[] }[] = [];
  for (const name of existsSync(dir) ? readdirSync(dir).filter((d) => d.startsWith('snap-')) : []) {
    const meta = JSON.parse(readFileSync(path.join(dir, name, 'meta.json'), 'utf8')) as SnapshotMeta;
    out.push({ seq: BigInt(meta.seq), ids: await snapshotUserIds(store.reader({ dir: path.join(dir, name), meta })) });
  }
  return out;
}

test.serial("a stopped replica's snapshot older than an erasure is rewritten and deleted when it starts, before it serves", async (t) => {
  const db = createDb(h.config.database.url, 4, { bindModels: false });
  t.teardown(() => db.destroy());
  const logger = createLogger({ level: 'silent' });
  const dirA = mkdtempSync(path.join(os.tmpdir(), 'faceid-snap-a-'));
  const dirB = mkdtempSync(path.join(os.tmpdir(), 'faceid-snap-b-'));
  const replica = (dir: string) =>
    new IndexReplica(db, { factory: 'BinarySketch512', nprobe: 1, syncIntervalMs: 100, logger, snapshotDir: dir, erasureMaxSeconds: 3 });

  const users = await Promise.all(Array.from({ length: 6 }, () => newConsumer(h)));
  for (const [i, u] of users.entries()) await upsertCanonical(h.deps.db, u.userId, unit(100 + i), 'link_nin', FACE_ENGINE_VERSION);
  const erased = users[0]!.userId;

  // Replica B writes its snapshot (holding the user), then stops.
  const b1 = replica(dirB);
  await b1.start();
  await b1.snapshot();
  await b1.stop();
  t.true((await snapshotsIn(dirB)).some((s) => s.ids.includes(erased)));

  // The erasure: the removal, Redis purged; the running replica A rewrites its snapshot and the receipt follows.
  await removeCanonical(h.deps.db, erased);
  const deleteSeq = await currentChangeSeq(h.deps.db);
  await h.deps.db('erasures').insert({ userId: erased, deleteSeq: String(deleteSeq), redisPurgedAt: new Date() });
  const a = replica(dirA);
  await a.start();
  await a.snapshot();
  await a.eraseFromSnapshots();
  t.teardown(() => a.stop());
  const until = Date.now() + 10_000;
  while (!(await h.deps.db('erasures').where({ userId: erased }).first()).completedAt && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
  t.truthy((await h.deps.db('erasures').where({ userId: erased }).first()).completedAt, 'the receipt did not wait for the stopped replica');
  t.true(
    (await snapshotsIn(dirB)).some((s) => s.ids.includes(erased)),
    "the stopped replica's disk still holds the vector",
  );

  // B starts again: before start() returns (before it serves), no snapshot on its disk holds the vector.
  const b2 = replica(dirB);
  await b2.start();
  t.teardown(() => b2.stop());
  const after = await snapshotsIn(dirB);
  t.true(after.length >= 1);
  for (const s of after) {
    t.false(s.ids.includes(erased), `snapshot at seq ${s.seq} still holds the erased vector`);
    t.true(s.seq >= BigInt(deleteSeq));
  }
  t.false(
    (await b2.knn(unit(100), 3, await currentChangeSeq(h.deps.db))).hits.some((x) => x.userId === erased),
    'and it never serves the erased user',
  );
  t.true((await b2.knn(unit(101), 1, await currentChangeSeq(h.deps.db))).hits[0]?.userId === users[1]!.userId);
});
