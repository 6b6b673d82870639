/**
 * The search replica on the default `BinarySketch512` engine (docs/vector-index.md), against a real
 * PostgreSQL database, small sizes: snapshots (start from one = full build; a damaged one is refused),
 * micro-batching, retraining on growth, change-log pruning, and read-your-writes / deletes across two
 * replicas and across a snapshot restart; snapshot files sealed under the key ring (no id or template
 * in clear, tampering refused, a rotated key still read). Writes go through api/services/embedding-store.ts.
 * `rerankCandidates` is kept small (50) so that the Hamming stage really filters at these sizes.
 */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, writeFileSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Knex } from 'knex';
import { createDb } from '../../platform/database/db.js';
import { FACE_ENGINE_VERSION } from '../../platform/face/face-models.js';
import { createLogger } from '../../platform/logger.js';
import { currentChangeSeq, removeCanonical, upsertCanonical } from '../../features/face/embeddings-repository.js';
import { KeyRing } from '../../platform/keys/key-ring.js';
import { PgChangeLogSource } from '../../features/search/worker/change-log-source.js';
import { IndexReplica, type ReplicaOptions } from '../../features/search/worker/replica.js';
import { SnapshotStore, type SnapshotMeta } from '../../features/search/worker/snapshot-store.js';
import { SketchEngine, snapshotUserIds } from '../../features/search/worker/sketch-engine.js';
import { openRowFor } from '../../features/search/worker/sealed-rows-file.js';
import { uuidBytes } from '../../features/search/worker/id-table.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { atCosine, rng } from '../helpers/vectors.js';
import { processKeyRing, sealTemplate } from '../../platform/keys/templates.js';

const DIM = 512;
/** Clustered-ish unit vectors (a shared component makes neighbours compete, as in face embeddings). */
function vec(seed: number): number[] {
  const r = rng(seed),
    c = rng(7);
  const v = Array.from({ length: DIM }, (_, i) => r() - 0.5 + 0.3 * (c() - 0.5) + (i < 8 ? 0.2 : 0));
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}
function near(v: number[], seed: number, c = 0.7): number[] {
  return atCosine(v, vec(seed + 1_000_000), c);
}

let tdb: TestDatabase;
let db: Knex;
const logger = createLogger({ level: 'silent' });
const ring = processKeyRing();
const replicas: IndexReplica[] = [];

test.before(async () => {
  tdb = await createTestDatabase();
  db = createDb(tdb.url, 6, { bindModels: false });
});
test.after.always(async () => {
  await Promise.allSettled(replicas.map((r) => r.stop()));
  await db?.destroy();
  await tdb?.drop();
});

const tmpDir = () => mkdtempSync(path.join(os.tmpdir(), 'faceid-snap-'));

function replica(opts: Partial<ReplicaOptions> & { snapshotDir: string | null }): IndexReplica {
  const r = new IndexReplica(db, {
    factory: 'BinarySketch512',
    nprobe: 1,
    syncIntervalMs: 0,
    pruneIntervalMs: 0,
    rerankCandidates: 50,
    autoRebuild: false,
    logger,
    ...opts,
  });
  replicas.push(r);
  return r;
}

/** Enrols `n` users directly (a bulk population before any replica exists; not logged). */
async function bulk(n: number, seed0: number): Promise<{ id: string; seed: number }[]> {
  const out: { id: string; seed: number }[] = [];
  for (let i = 0; i < n; i += 500) {
    const m = Math.min(500, n - i);
    const ids = (await db.raw(`INSERT INTO users (phone) SELECT '+2' || (g + ?)::text FROM generate_series(1, ?) g RETURNING id`, [seed0 + i, m])).rows.map(
      (r: { id: string }) => r.id,
    ) as string[];
    // Sealed as the API seals them (templates are never stored in clear).
    await db('canonicalEmbeddings').insert(
      ids.map((id, j) => ({
        userId: id,
        embedding: sealTemplate(ring, id, vec(seed0 + i + j)),
        keyId: ring.activeKeyId,
        source: 'link_nin',
        engineVersion: FACE_ENGINE_VERSION,
      })),
    );
    ids.forEach((id, j) => out.push({ id, seed: seed0 + i + j }));
  }
  return out;
}

async function newUser(): Promise<string> {
  return (await db.raw(`INSERT INTO users (phone) VALUES ('+3' || floor(random() * 1e9)::text) RETURNING id`)).rows[0].id as string;
}

const head = () => currentChangeSeq(db);
const top = async (r: IndexReplica, q: number[], k = 5) => (await r.knn(q, k, await head())).hits;

let population: { id: string; seed: number }[] = [];

test.serial('a start from a snapshot answers exactly as a full build; a damaged snapshot is refused and a full build serves', async (t) => {
  population = await bulk(1500, 1);
  // Some logged writes before the snapshot.
  for (let i = 0; i < 5; i++) await upsertCanonical(db, population[i]!.id, vec(50_000 + i), 'verify_self', FACE_ENGINE_VERSION);
  for (let i = 5; i < 8; i++) await removeCanonical(db, population[i]!.id);
  const shared = tmpDir();
  const a = replica({ snapshotDir: shared });
  await a.start();
  t.is(a.stats.lastBuild?.from, 'postgres');
  t.is(a.snapshotSeq, BigInt(await head()), 'the full build wrote a snapshot at the head');

  // Writes after the snapshot: a restart must replay them.
  const late = await newUser();
  await upsertCanonical(db, late, vec(60_000), 'link_nin', FACE_ENGINE_VERSION);
  await upsertCanonical(db, population[10]!.id, vec(60_001), 'verify_self', FACE_ENGINE_VERSION);
  await removeCanonical(db, population[11]!.id);

  const fromSnapshot = replica({ snapshotDir: shared });
  await fromSnapshot.start();
  t.is(fromSnapshot.stats.lastBuild?.from, 'snapshot');
  const full = replica({ snapshotDir: tmpDir() });
  await full.start();
  t.is(full.stats.lastBuild?.from, 'postgres');
  t.is(fromSnapshot.engine.size, full.engine.size);

  // The same index as the build that wrote the snapshot (same codes, rows and changes applied), to the
  // last approximate candidate; and the same top answers as a full build made now (its training
  // sample differs by the later writes, so only the exact top of the candidates is compared).
  const queries = [...Array.from({ length: 30 }, (_, i) => near(vec(1 + 40 * i), 900 + i)), vec(60_000), vec(60_001), vec(12)];
  for (const q of queries) {
    const got = await top(fromSnapshot, q);
    t.deepEqual(got, await top(a, q));
    t.deepEqual(got[0], (await top(full, q))[0]);
  }
  t.is((await top(fromSnapshot, vec(60_000)))[0]?.userId, late);
  t.false(
    (await top(fromSnapshot, vec(12), 50)).some((h) => h.userId === population[11]!.id),
    'removed after the snapshot',
  );
  t.false(
    (await top(fromSnapshot, vec(6), 50)).some((h) => h.userId === population[6]!.id),
    'removed before the snapshot',
  );

  // Damage the snapshot's re-rank rows (one byte of one row): with the check before serving, refused
  // at open, full build, same answers (the background check: the next test).
  const snapDir = readdirSync(shared).find((n) => n.startsWith('snap-'))!;
  const file = path.join(shared, snapDir, 'vectors.sealed');
  const bytes = readFileSync(file);
  bytes[bytes.length >> 1] ^= 0x40;
  writeFileSync(file, bytes);
  const afterDamage = replica({ snapshotDir: shared, snapshotCheck: 'before-serving' });
  await afterDamage.start();
  t.true(afterDamage.stats.snapshotsRefused >= 1);
  t.is(afterDamage.stats.lastBuild?.from, 'postgres');
  for (const q of queries.slice(0, 10)) t.deepEqual((await top(afterDamage, q))[0], (await top(full, q))[0]);

  // An unreadable meta.json, or a truncated codes file: not loaded either.
  const other = tmpDir();
  const w = replica({ snapshotDir: other });
  await w.start(); // writes a snapshot into `other`
  const d2 = path.join(
    other,
    readdirSync(other).find((n) => n.startsWith('snap-'))!,
  );
  writeFileSync(path.join(d2, 'codes.bin'), readFileSync(path.join(d2, 'codes.bin')).subarray(0, 64));
  const afterTruncation = replica({ snapshotDir: other });
  await afterTruncation.start();
  t.is(afterTruncation.stats.lastBuild?.from, 'postgres');
  for (const n of readdirSync(other).filter((x) => x.startsWith('snap-'))) writeFileSync(path.join(other, n, 'meta.json'), '{not json');
  const afterBadMeta = replica({ snapshotDir: other });
  await afterBadMeta.start();
  t.is(afterBadMeta.stats.lastBuild?.from, 'postgres');
  t.deepEqual((await top(afterBadMeta, queries[0]!))[0], (await top(full, queries[0]!))[0]);
});

test.serial('micro-batched searches give the same results as one-at-a-time searches', async (t) => {
  // exactCandidates 20 < rerankCandidates 50: the refine step (asymmetric estimate) runs too.
  const r = replica({ snapshotDir: null, maxBatch: 16, exactCandidates: 20 });
  await r.start();
  const queries = Array.from({ length: 40 }, (_, i) => near(vec(1 + 31 * i), 5000 + i, 0.6));
  const one: unknown[] = [];
  for (const q of queries) one.push(await top(r, q, 10));
  const batchesBefore = r.stats.batches;
  const seq = await head();
  const together = await Promise.all(queries.map((q) => r.knn(q, 10, seq)));
  t.deepEqual(
    together.map((x) => x.hits),
    one,
  );
  t.true(r.stats.largestBatch > 1, `largest batch ${r.stats.largestBatch}`);
  t.true(r.stats.batches - batchesBefore < queries.length, 'fewer engine calls than searches');
  // Mixed k and minSeq in one batch: each gets its own k, all after the largest minSeq.
  const u = await newUser();
  const { seq: wseq } = await upsertCanonical(db, u, vec(70_000), 'link_nin', FACE_ENGINE_VERSION);
  const [a, b] = await Promise.all([r.knn(vec(70_000), 1, '0'), r.knn(vec(70_000), 3, String(wseq))]);
  t.is(a.hits.length, 1);
  t.is(b.hits.length, 3);
  t.is(b.hits[0]!.userId, u);
});

test.serial('the index is retrained in the background once the population has grown past the factor, and answers meanwhile', async (t) => {
  const r = replica({ snapshotDir: tmpDir(), retrainGrowth: 1.1, autoRebuild: true });
  await r.start();
  const e0 = r.engine as SketchEngine;
  t.true(e0.trainedOn >= 1000, 'trained at start on the population present');
  const trainedAt = e0.trainedAtSize;
  // Grow past 1.1x through the change log.
  const added: string[] = [];
  const grow = Math.ceil(trainedAt * 0.1) + 20;
  for (let i = 0; i < grow; i += 20) {
    const ids = await Promise.all(Array.from({ length: 20 }, () => newUser()));
    await Promise.all(ids.map((id, j) => upsertCanonical(db, id, vec(80_000 + i + j), 'link_nin', FACE_ENGINE_VERSION)));
    added.push(...ids);
  }
  const gone = added[3]!;
  await removeCanonical(db, gone);
  // The catch-up that applies them triggers the retraining; searches keep answering meanwhile.
  const until = Date.now() + 60_000;
  while (r.engine === e0 && Date.now() < until) {
    const hits = await top(r, near(vec(80_010), 3));
    t.is(hits[0]?.userId, added[10]);
    t.false((await top(r, vec(80_003), 20)).some((h) => h.userId === gone));
    await new Promise((res) => setTimeout(res, 50));
  }
  t.is(r.stats.lastBuild?.reason, 'retrain');
  t.is(r.stats.lastBuild?.from, 'own-state');
  const e1 = r.engine as SketchEngine;
  t.not(e1, e0);
  t.true(e1.trainedAtSize > trainedAt * 1.1, `retrained at ${e1.trainedAtSize}`);
  t.is(e1.dead, 0);
  t.is((await top(r, near(vec(80_010), 3)))[0]?.userId, added[10]);
  t.false((await top(r, vec(80_003), 20)).some((h) => h.userId === gone));
});

test.serial('the change log is pruned below what every live replica has applied; a replica left behind rebuilds and stays correct', async (t) => {
  // Replicas of the earlier tests would hold pruning back: stop them (a clean stop forgets its position).
  await Promise.all(replicas.splice(0).map((r) => r.stop()));
  const a = replica({ snapshotDir: tmpDir(), replicaStaleMs: 60_000 });
  const b = replica({ snapshotDir: tmpDir(), replicaStaleMs: 60_000 });
  const behind = replica({ snapshotDir: tmpDir() });
  await Promise.all([a.start(), b.start(), behind.start()]);
  const users = await Promise.all(Array.from({ length: 6 }, () => newUser()));
  for (const [i, u] of users.entries()) await upsertCanonical(db, u, vec(90_000 + i), 'link_nin', FACE_ENGINE_VERSION);
  await removeCanonical(db, users[0]!);
  const h1 = BigInt(await head());
  // a is at the head with a fresh snapshot; b has not applied the new changes yet.
  await top(a, vec(1));
  await a.snapshot();
  t.is(a.snapshotSeq, h1);
  // `behind` is away: its position no longer counts.
  await a.source.forgetReplica(behind.replicaId);
  const bApplied = b.appliedSeq;
  const p1 = await a.prune();
  t.is(p1.through, bApplied, 'held back by b (its applied seq and its snapshot are both at its start)');
  t.true(p1.through < h1);
  // b catches up (nothing it needs was pruned) and reports; the next prune reaches the head.
  t.is((await top(b, vec(90_001)))[0]?.userId, users[1]);
  await b.snapshot();
  const p2 = await a.prune();
  t.is(p2.through, h1);
  const left = (await db.raw('SELECT array_agg(seq::text) AS seqs FROM embedding_changes WHERE seq <= ?', [String(h1)])).rows[0].seqs;
  t.deepEqual(left, [String(h1)], 'every change through the pruned point is gone but the newest (the API reads max(seq) as minSeq)');
  t.is(await head(), String(h1));

  // `behind` still holds the state before these writes: it must not answer from it. It rebuilds
  // (its own snapshot is older than the pruned point, so in full) and then answers correctly.
  const res = await top(behind, vec(90_002));
  t.is(res[0]?.userId, users[2], JSON.stringify({ res, stats: behind.stats, applied: String(behind.appliedSeq), h1: String(h1) }));
  t.false(
    (await top(behind, vec(90_000), 50)).some((h) => h.userId === users[0]),
    'a removal pruned from the log is still applied',
  );
  t.is(behind.stats.lastBuild?.reason, 'behind-pruned');
  t.is(behind.stats.lastBuild?.from, 'postgres');
  t.true(behind.stats.snapshotsRefused >= 1);
});

test.serial('write-then-search and delete-then-search across two replicas, and across a snapshot restart', async (t) => {
  const shared = tmpDir();
  let [a, b] = [replica({ snapshotDir: shared }), replica({ snapshotDir: shared })];
  await Promise.all([a.start(), b.start()]);
  const check = async (rs: IndexReplica[], q: number[], present: string | null, absent: string[]) => {
    for (const r of rs) {
      const hits = await top(r, q, 20);
      if (present) t.is(hits[0]?.userId, present);
      for (const x of absent)
        t.false(
          hits.some((h) => h.userId === x),
          `${x} returned`,
        );
    }
  };
  const kept: string[] = [];
  const removed: string[] = [];
  for (let round = 0; round < 3; round++) {
    const u = await newUser();
    await upsertCanonical(db, u, vec(100_000 + round), 'link_nin', FACE_ENGINE_VERSION);
    await check([a, b], near(vec(100_000 + round), round), u, []);
    const v = await newUser();
    await upsertCanonical(db, v, vec(100_100 + round), 'link_nin', FACE_ENGINE_VERSION);
    await removeCanonical(db, v);
    await check([b, a], vec(100_100 + round), null, [v]);
    kept.push(u);
    removed.push(v);
  }
  // Snapshot, then more changes between the snapshot and the restart.
  await a.snapshot();
  const between = await newUser();
  await upsertCanonical(db, between, vec(100_200), 'link_nin', FACE_ENGINE_VERSION);
  await removeCanonical(db, kept[0]!);
  await Promise.all([a.stop(), b.stop()]);
  [a, b] = [replica({ snapshotDir: shared }), replica({ snapshotDir: shared })];
  await Promise.all([a.start(), b.start()]);
  t.is(a.stats.lastBuild?.from, 'snapshot');
  t.is(b.stats.lastBuild?.from, 'snapshot');
  await check([a, b], vec(100_200), between, []);
  await check([a, b], vec(100_000), null, [kept[0]!]);
  await check([a, b], vec(100_001), kept[1]!, removed);
  const w = await newUser();
  await upsertCanonical(db, w, vec(100_300), 'link_nin', FACE_ENGINE_VERSION);
  await check([b, a], near(vec(100_300), 9), w, []);
  await removeCanonical(db, w);
  await check([a, b], vec(100_300), null, [w]);
});

/** Whether 512 float32 (little-endian) from byte `at` form a unit-norm vector (a template in clear). */
function unitVectorAt(buf: Buffer, at: number): boolean {
  let ss = 0;
  for (let i = 0; i < DIM; i++) {
    const x = buf.readFloatLE(at + i * 4);
    if (!Number.isFinite(x) || Math.abs(x) > 1) return false;
    ss += x * x;
  }
  return Math.abs(ss - 1) < 1e-3;
}
function holdsUnitVector(buf: Buffer): boolean {
  for (let at = 0; at + DIM * 4 <= buf.length; at++) if (unitVectorAt(buf, at)) return true;
  return false;
}
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
const snapDirs = (dir: string) =>
  readdirSync(dir)
    .filter((n) => n.startsWith('snap-'))
    .map((n) => path.join(dir, n));
const metaOf = (snap: string) => JSON.parse(readFileSync(path.join(snap, 'meta.json'), 'utf8')) as SnapshotMeta;
/** The key id named by a sealed file's first frame (magic 8 bytes, u32 length, key-ring blob). */
const firstFrameKey = (file: string) => KeyRing.keyIdOf(readFileSync(file).subarray(12));
/** The ring key a snapshot file names: a rows file in its header (u8 length at 16, the id from 17), a framed file in its first frame. */
const fileKey = (file: string) => {
  const b = readFileSync(file);
  return b.subarray(0, 8).toString('latin1') === 'FIDROWS1' ? b.toString('utf8', 17, 17 + b[16]!) : firstFrameKey(file);
};
const keyRing = (keys: Record<string, string>, active: string) =>
  KeyRing.from({
    biometricKeys: Object.entries(keys)
      .map(([k, v]) => `${k}:${v}`)
      .join(','),
    biometricActiveKeyId: active,
  });

test.serial(
  'snapshots are sealed under the key ring: no user id or template in clear; a tampered file is refused; a rotated key is still read and the next snapshot uses the active key; a snapshot in clear is refused and deleted',
  async (t) => {
    if (population.length === 0) population = await bulk(1500, 1);
    const [k1, k2, k3] = [0, 1, 2].map(() => randomBytes(32).toString('base64'));
    const ringK1 = keyRing({ k1 }, 'k1');
    // The templates in PostgreSQL stay under the process ring; only the snapshots use the ring under test.
    const sealed = (snapshotDir: string, keyRing: KeyRing) => replica({ snapshotDir, keyRing, source: new PgChangeLogSource(db, ring) });
    const dir = tmpDir();
    const a = sealed(dir, ringK1);
    await a.start();
    t.is(a.stats.lastBuild?.from, 'postgres');
    const [snap] = snapDirs(dir);
    t.truthy(snap, 'the full build wrote a snapshot');
    const meta = metaOf(snap!);
    t.deepEqual(Object.keys(meta.files).sort(), ['codes.bin', 'ids.bin', 'vectors.sealed']);

    // On disk: no user id, no unit-norm float32 vector, in any file; the same files decrypted hold both.
    const someIds = (await db('canonicalEmbeddings').where({ engineVersion: FACE_ENGINE_VERSION }).limit(50).select('userId')).map(
      (r: { userId: string }) => r.userId,
    );
    t.is(someIds.length, 50);
    for (const name of Object.keys(meta.files)) {
      const bytes = readFileSync(path.join(snap!, name));
      t.false(UUID.test(bytes.toString('latin1')), `${name} holds no user id in clear`);
      for (const id of someIds) t.false(bytes.includes(Buffer.from(uuidBytes(id))), `${name} holds no user id's bytes in clear`);
      t.false(holdsUnitVector(bytes), `${name} holds no template in clear`);
      t.is(fileKey(path.join(snap!, name)), 'k1');
    }
    const reader = new SnapshotStore(dir, ringK1).reader({ dir: snap!, meta });
    const ids = await snapshotUserIds(reader);
    t.is(ids.length, a.engine.size);
    for (const id of someIds) t.true(ids.includes(id));
    const { file: rowsFile, access } = reader.rowsFile('vectors.sealed', DIM);
    const last = ids.length - 1;
    for (const row of [0, last]) {
      const v = openRowFor(rowsFile, access, DIM, row, ids[row]!);
      t.true(v !== null && unitVectorAt(Buffer.from(v.buffer, v.byteOffset, v.byteLength), 0), 'decrypted: the templates');
    }
    t.is(openRowFor(rowsFile, access, DIM, 0, ids[last]!), null, 'a row does not open for another user');

    // A restart decrypts the snapshot and answers as the replica that wrote it.
    const restarted = sealed(dir, ringK1);
    await restarted.start();
    t.is(restarted.stats.lastBuild?.from, 'snapshot');
    t.is(restarted.stats.snapshotsRefused, 0);
    t.is(restarted.engine.size, a.engine.size);
    for (const p of population.slice(20, 30)) t.deepEqual(await top(restarted, vec(p.seed)), await top(a, vec(p.seed)));

    // Rotation: a ring holding k1 and k2 (active) still reads the k1 snapshot; the next one is written under k2.
    const rotated = sealed(dir, keyRing({ k1, k2 }, 'k2'));
    await rotated.start();
    t.is(rotated.stats.lastBuild?.from, 'snapshot');
    await rotated.snapshot();
    const newest = snapDirs(dir)
      .map((d) => ({ d, at: metaOf(d).createdAt }))
      .sort((x, y) => (x.at < y.at ? 1 : -1))[0]!.d;
    t.not(newest, snap);
    for (const name of ['codes.bin', 'ids.bin', 'vectors.sealed']) t.is(fileKey(path.join(newest, name)), 'k2');
    // Once k1 is dropped, the k2 snapshot is read; a ring without either key refuses every snapshot (logged) and builds in full.
    const afterDrop = sealed(dir, keyRing({ k2 }, 'k2'));
    await afterDrop.start();
    t.is(afterDrop.stats.lastBuild?.from, 'snapshot');
    const unknownKey = sealed(dir, keyRing({ k3 }, 'k3'));
    await unknownKey.start();
    t.true(unknownKey.stats.snapshotsRefused >= 1);
    t.is(unknownKey.stats.lastBuild?.from, 'postgres');

    // One flipped bit, the size unchanged: the frame does not authenticate; refused, full build.
    const other = tmpDir();
    const w = sealed(other, ringK1);
    await w.start();
    const [victim] = snapDirs(other);
    const file = path.join(victim!, 'ids.bin');
    const bytes = readFileSync(file);
    bytes[bytes.length - 5] ^= 0x01;
    writeFileSync(file, bytes);
    const afterTamper = sealed(other, ringK1);
    await afterTamper.start();
    t.true(afterTamper.stats.snapshotsRefused >= 1);
    t.is(afterTamper.stats.lastBuild?.from, 'postgres');
    for (const p of population.slice(40, 45)) t.deepEqual((await top(afterTamper, vec(p.seed)))[0], (await top(a, vec(p.seed)))[0]);

    // A snapshot in clear left by an older version (format 1, ids.txt readable): never loaded, and deleted at the next retirement.
    const legacyDir = tmpDir();
    const legacy = path.join(legacyDir, path.basename(snap!));
    mkdirSync(legacy, { mode: 0o700 });
    writeFileSync(path.join(legacy, 'ids.txt'), ids.join('\n'));
    writeFileSync(path.join(legacy, 'meta.json'), JSON.stringify({ ...meta, format: 1, id: undefined, files: { 'ids.txt': { bytes: 1 } } }));
    const afterLegacy = sealed(legacyDir, ringK1);
    await afterLegacy.start();
    t.true(afterLegacy.stats.snapshotsRefused >= 1);
    t.is(afterLegacy.stats.lastBuild?.from, 'postgres');
    const t0 = Date.now();
    while (existsSync(legacy) && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 50));
    t.false(existsSync(legacy), 'the snapshot in clear is deleted');
    t.is(snapDirs(legacyDir).length, 1, 'the sealed snapshot of the full build is kept');
  },
);

test.serial(
  'SEARCH_SNAPSHOT_CHECK=background (the default): a replica serves from a snapshot whose rows are still being authenticated; a damaged row found by that check deletes the snapshot and a full build serves, no answer using the row',
  async (t) => {
    if (population.length === 0) population = await bulk(1500, 1);
    const dir = tmpDir();
    const writer = replica({ snapshotDir: dir });
    await writer.start(); // a full build, written as a snapshot
    const [snap] = snapDirs(dir);
    const clean = replica({ snapshotDir: dir });
    await clean.start();
    t.is(clean.stats.lastBuild?.from, 'snapshot');
    await clean.engine.rowsChecked;
    t.like(clean.health().snapshotRowsCheck, { state: 'passed' }, 'an intact snapshot passes the check it served beside');
    t.true(existsSync(snap!));

    // The answers first: `writer` serves from this very file.
    const queries = Array.from({ length: 12 }, (_, i) => near(vec(1 + 97 * i), 700 + i));
    const expected = await Promise.all(queries.map((q) => top(writer, q)));
    // One byte of one row in the middle of the file.
    const file = path.join(snap!, 'vectors.sealed');
    const bytes = readFileSync(file);
    bytes[bytes.length >> 1] ^= 0x40;
    writeFileSync(file, bytes);
    const b = replica({ snapshotDir: dir });
    await b.start();
    t.is(b.stats.lastBuild?.from, 'snapshot', 'served from the snapshot before its rows were all authenticated');
    // Searches while the check runs and the index is loaded again: the right answer, or the clear
    // error of a search that read the damaged row; never an answer built on it.
    for (const [i, q] of queries.entries()) {
      try {
        t.deepEqual(await top(b, q), expected[i]);
      } catch (e) {
        t.regex(String((e as Error).message), /does not authenticate|being rebuilt/);
      }
    }
    const t0 = Date.now();
    while (b.stats.lastBuild?.from !== 'postgres' && Date.now() - t0 < 20_000) await new Promise((r) => setTimeout(r, 50));
    t.is(b.stats.lastBuild?.from, 'postgres', 'the damaged snapshot dropped: a full build serves');
    t.true(b.stats.snapshotsRefused >= 1);
    t.false(existsSync(snap!), 'the damaged snapshot is deleted, so no restart or other replica opens it');
    for (const [i, q] of queries.entries()) t.deepEqual(await top(b, q), expected[i]);
    await b.engine.rowsChecked;
    t.like(b.health().snapshotRowsCheck, { state: 'passed' }, "the full build's own snapshot passes");
  },
);

test.serial(
  'a re-rank row altered under a serving replica: the search that reads it fails with a clear error, and the replica reloads (the snapshot refused) and answers',
  async (t) => {
    if (population.length === 0) population = await bulk(1500, 1);
    const dir = tmpDir();
    const a = replica({ snapshotDir: dir });
    await a.start();
    const reference = replica({ snapshotDir: null });
    await reference.start();
    const q = vec(population[3]!.seed);
    const before = await top(a, q);
    // Alter one byte of every sealed row in place (the serving replica maps this very file).
    const [snap] = snapDirs(dir);
    const fd = openSync(path.join(snap!, 'vectors.sealed'), 'r+');
    const record = 28 + DIM * 4;
    const one = Buffer.alloc(1);
    for (let r = 0; r < a.engine.size + a.engine.dead; r++) {
      const at = 128 + r * record + 40;
      readSync(fd, one, 0, 1, at);
      one[0]! ^= 0x20;
      writeSync(fd, one, 0, 1, at);
    }
    closeSync(fd);
    const builds = a.stats.builds;
    await t.throwsAsync(top(a, q), { message: /row \d+ does not authenticate/ }, 'the search does not use the row');
    const t0 = Date.now();
    while (a.stats.builds === builds && Date.now() - t0 < 20_000) await new Promise((r) => setTimeout(r, 50));
    t.is(a.stats.lastBuild?.from, 'postgres', 'reloaded: the damaged snapshot refused at open, a full build');
    t.true(a.stats.snapshotsRefused >= 1);
    t.deepEqual(await top(a, q), before);
    t.deepEqual(await top(a, q), await top(reference, q));
  },
);
