/**
 * The FAISS index with its own id mapping (features/search/worker/faiss-engine.ts), the replica that keeps it
 * in step with PostgreSQL (replica.ts), and read-your-writes across two real search workers.
 * Embeddings here are synthetic unit vectors (the face pipeline has its own tests); every write goes
 * through features/face/embeddings-repository.ts, the only write path.
 */
import test from 'ava';
import { FACE_ENGINE_VERSION } from '../../platform/face/face-models.js';
import { createDb } from '../../platform/database/db.js';
import { createLogger } from '../../platform/logger.js';
import { currentChangeSeq, removeCanonical, upsertCanonical } from '../../features/face/embeddings-repository.js';
import { FaissEngine, describeFactory } from '../../features/search/worker/faiss-engine.js';
import { IndexReplica } from '../../features/search/worker/replica.js';
import { useHarness, type Harness } from '../helpers/harness.js';
import { newConsumer, newOperator } from '../helpers/principals.js';
import { atCosine, rng } from '../helpers/vectors.js';

const DIM = 512;

/** Deterministic pseudo-random unit vectors. */
function unit(seed: number): number[] {
  const r = rng(seed);
  const v = Array.from({ length: DIM }, () => r() - 0.5);
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}
/** A vector at cosine ~c with `v` (a "second photo" of the same person). */
function near(v: number[], seed: number, c = 0.8): number[] {
  return atCosine(v, unit(seed), c);
}

// ------------------------------------------------------------------------------------------------
// The index alone
// ------------------------------------------------------------------------------------------------

test('upsert, replace and remove: a removed or replaced vector is never returned, k live hits still are', (t) => {
  const ix = FaissEngine.create({ factory: 'Flat' });
  t.true(ix.exact);
  for (let i = 0; i < 50; i++) ix.upsert(`u${i}`, unit(i));
  t.is(ix.size, 50);
  const hit = ix.search(near(unit(7), 1000), 3);
  t.is(hit[0]!.userId, 'u7');
  t.true(Math.abs(hit[0]!.score - 0.8) < 1e-3, `score ${hit[0]!.score}`);

  // Remove u7: gone, and still 3 hits.
  t.true(ix.remove('u7'));
  t.false(ix.remove('u7'));
  const after = ix.search(unit(7), 3);
  t.is(after.length, 3);
  t.false(after.some((h) => h.userId === 'u7'));

  // Replace u8's vector by u7's: the old one is dead, the new one answers.
  ix.upsert('u8', unit(7));
  t.is(ix.search(unit(7), 1)[0]!.userId, 'u8');
  t.false(ix.search(unit(8), 50).some((h) => h.userId === 'u8' && h.score > 0.5));
  t.is(ix.size, 49);
  t.is(ix.dead, 2);
  t.is(ix.rows, 51);

  // Asking for more than is live returns every live user once, none dead.
  const all = ix.search(unit(1), 500);
  t.is(all.length, 49);
  t.is(new Set(all.map((h) => h.userId)).size, 49);
  for (let i = 1; i < all.length; i++) t.true(all[i - 1]!.score >= all[i]!.score);

  // Batched queries give the same answers as single ones.
  const many = ix.searchMany([unit(3), unit(4)], 2);
  t.deepEqual(many[0], ix.search(unit(3), 2));
  t.deepEqual(many[1], ix.search(unit(4), 2));

  // An empty index answers nothing (FAISS itself would abort on k = 0 or k > ntotal).
  const empty = FaissEngine.create({ factory: 'Flat' });
  t.deepEqual(empty.search(unit(1), 5), []);
  for (let i = 0; i < 3; i++) empty.upsert(`x${i}`, unit(i));
  for (let i = 0; i < 3; i++) empty.remove(`x${i}`);
  t.deepEqual(empty.search(unit(1), 5), []);
});

test('a type that needs training falls back to exact Flat below its minimum, trains above it, and takes nprobe', (t) => {
  const info = describeFactory('IVF16,Flat');
  t.is(info.nlist, 16);
  t.is(info.minTrain, 1000);
  const small = FaissEngine.create(
    { factory: 'IVF16,Flat', nprobe: 8 },
    Array.from({ length: 100 }, (_, i) => unit(i)),
  );
  t.true(small.fallback);
  t.is(small.effectiveFactory, 'Flat');
  t.true(small.exact);

  const data = Array.from({ length: 1500 }, (_, i) => unit(i));
  const ivf = FaissEngine.create({ factory: 'IVF16,Flat', nprobe: 8 }, data);
  t.false(ivf.fallback);
  t.false(ivf.exact);
  t.is(ivf.effectiveFactory, 'IVF16,Flat');
  t.is(ivf.trainedOn, info.trainSample); // a sample of the 1500
  t.is(ivf.nprobe, 8);
  const template = ivf.template();
  ivf.upsertMany(data.map((v, i) => ({ userId: `u${i}`, vector: v })));
  let found = 0;
  for (let i = 0; i < 100; i++) if (ivf.search(near(data[i]!, 5000 + i, 0.6), 1)[0]?.userId === `u${i}`) found++;
  t.true(found >= 90, `IVF16 nprobe 8 found ${found}/100 genuine pairs`);

  // A copy from the template is trained, empty, and keeps nprobe.
  const copy = FaissEngine.fromTemplate({ factory: 'IVF16,Flat' }, template);
  t.is(copy.size, 0);
  t.is(copy.nprobe, 8);
  copy.upsert('a', data[0]!);
  t.is(copy.search(data[0]!, 1)[0]!.userId, 'a');

  t.throws(() => describeFactory('IDMap,Flat'), { message: /IDMap/ });
  t.throws(() => FaissEngine.create({ factory: 'NoSuchIndex' }), { message: /could not parse/ });
});

// ------------------------------------------------------------------------------------------------
// Read-your-writes across two search workers
// ------------------------------------------------------------------------------------------------

// No background sync: only the minSeq catch-up can make a write visible to a search right away.
const h = useHarness(test, { search: 2, env: { SEARCH_SYNC_INTERVAL_MS: '0', SEARCH_WORKER_CONCURRENCY: '1' } });

async function served(): Promise<number[]> {
  return Promise.all(h.searchWorkers.map(async (w) => ((await (await fetch(`${w.url}/health`)).json()) as any).jobs.completed as number));
}

/** Runs parallel searches until both workers have answered at least one; returns every answer. */
async function searchOnBoth(v: number[], k = 3) {
  const before = await served();
  const answers: Awaited<ReturnType<Harness['deps']['face']['searchByEmbedding']>>[] = [];
  for (let round = 0; round < 20; round++) {
    answers.push(...(await Promise.all(Array.from({ length: 8 }, () => h.deps.face.searchByEmbedding(v, k)))));
    const now = await served();
    if (now.every((n, i) => n > before[i]!)) return answers;
  }
  throw new Error('the searches never reached both workers');
}

test.serial('a write is seen by the next search on every replica; a removal too', async (t) => {
  t.is(h.searchWorkers.length, 2);
  for (let round = 0; round < 3; round++) {
    const { userId } = await newConsumer(h);
    const v = unit(100 + round);
    const { seq } = await upsertCanonical(h.deps.db, userId, v, 'link_nin', FACE_ENGINE_VERSION);
    const found = await searchOnBoth(near(v, 200 + round, 0.7));
    t.true(found.length >= 2);
    for (const a of found) {
      t.is(a.hits[0]?.userId, userId, `round ${round}: a search after the write missed it`);
      t.true(Math.abs(a.hits[0]!.score - 0.7) < 0.01);
      t.true(BigInt(a.appliedSeq) >= BigInt(seq));
    }

    await removeCanonical(h.deps.db, userId);
    const gone = await searchOnBoth(v);
    for (const a of gone)
      t.false(
        a.hits.some((x) => x.userId === userId),
        `round ${round}: a removed user was returned`,
      );
  }
});

test.serial('the API /health reports the vector index size and applied sequence', async (t) => {
  const keep = await newConsumer(h);
  await upsertCanonical(h.deps.db, keep.userId, unit(300), 'verify_self', FACE_ENGINE_VERSION);
  const head = await currentChangeSeq(h.deps.db);
  await searchOnBoth(unit(300)); // the first worker (the one at SEARCH_HEALTH_URL) has now applied the head
  // The detail is for administrators (SPEC 12.3).
  const admin = await newOperator(h, { role: 'administrator' });
  const res = await fetch(`${h.url}/health`, { headers: { authorization: `Bearer ${admin.token}` } });
  const body = (await res.json()) as any;
  t.true(body.dependencies.vector_index.up);
  t.like(body.dependencies.vector_index.detail, { size: 1, appliedSeq: head, factory: 'BinarySketch512' });
});

test.serial('a restarted search worker starts from its snapshot plus the change log and still finds what was written', async (t) => {
  const a = await newConsumer(h);
  const b = await newConsumer(h);
  await upsertCanonical(h.deps.db, a.userId, unit(400), 'link_bvn', FACE_ENGINE_VERSION);
  await upsertCanonical(h.deps.db, b.userId, unit(401), 'link_bvn', FACE_ENGINE_VERSION);
  await upsertCanonical(h.deps.db, a.userId, unit(402), 'verify_self', FACE_ENGINE_VERSION); // replaced
  await removeCanonical(h.deps.db, b.userId);
  const head = await currentChangeSeq(h.deps.db);

  await Promise.all(h.searchWorkers.map((w) => w.close()));
  const fresh = await h.startSearchWorker();
  const health = (await (await fetch(`${fresh.url}/health`)).json()) as any;
  t.is(health.status, 'ok');
  t.is(health.appliedSeq, head);
  t.is(health.size, 2); // `a` and the one kept by the previous test
  t.is(health.tombstones, 0);
  t.is(health.lastBuild.from, 'snapshot', 'started from the snapshot the first workers wrote');

  const r = await h.deps.face.searchByEmbedding(unit(402), 3);
  t.is(r.hits[0]?.userId, a.userId);
  t.true(r.hits[0]!.score > 0.999);
  t.false(
    (await h.deps.face.searchByEmbedding(unit(400), 3)).hits.some((x) => x.userId === a.userId && x.score > 0.5),
    'the replaced vector is gone',
  );
  t.false(
    (await h.deps.face.searchByEmbedding(unit(401), 3)).hits.some((x) => x.userId === b.userId),
    'the removed user is gone',
  );
});

test.serial('a replica trains once there is enough data, compacts tombstones, and never returns a removed user meanwhile', async (t) => {
  const db = createDb(h.config.database.url, 2, { bindModels: false });
  const logger = createLogger({ level: 'silent' });
  const replica = new IndexReplica(db, { factory: 'IVF8,Flat', nprobe: 8, syncIntervalMs: 0, logger, compactMinDead: 20, compactDeadRatio: 0.01 });
  const ivf = () => replica.index as FaissEngine;
  try {
    const users: string[] = [];
    const write = async (from: number, to: number) => {
      for (let i = from; i < to; i += 50) {
        const batch = await Promise.all(Array.from({ length: Math.min(50, to - i) }, () => newConsumer(h)));
        await Promise.all(batch.map((u, j) => upsertCanonical(h.deps.db, u.userId, unit(10_000 + i + j), 'link_nin', FACE_ENGINE_VERSION)));
        users.push(...batch.map((u) => u.userId));
      }
    };
    // Start with too little data to train IVF8 (minimum 1000): exact Flat.
    await write(0, 600);
    await replica.start();
    t.true(ivf().fallback);
    t.is(replica.index.effectiveFactory, 'Flat');

    // Enough data arrives: the catch-up that applies it triggers a rebuild that trains IVF8.
    await write(600, 1100);
    const knn = async (i: number) => replica.knn(near(unit(10_000 + i), 77 + i, 0.7), 3, await currentChangeSeq(h.deps.db));
    t.is((await knn(700)).hits[0]?.userId, users[700]);
    const until = Date.now() + 20_000;
    while (ivf().fallback && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    t.is(replica.index.effectiveFactory, 'IVF8,Flat');
    t.is(replica.index.nprobe, 8);
    t.true(replica.index.size >= 1100);

    // Approximate index: scores are re-computed exactly from PostgreSQL.
    const r = await knn(900);
    t.is(r.hits[0]?.userId, users[900]);
    t.true(Math.abs(r.hits[0]!.score - 0.7) < 0.01);

    // Remove 40 users (tombstones pass compactMinDead): every search in between and after misses them.
    const removed = users.slice(0, 40);
    for (const [i, u] of removed.entries()) {
      await removeCanonical(h.deps.db, u);
      const res = await knn(i);
      t.false(
        res.hits.some((x) => x.userId === u),
        `removed user ${i} returned`,
      );
    }
    const until2 = Date.now() + 20_000;
    while (replica.index.dead > 0 && Date.now() < until2) {
      await replica.knn(unit(1), 1, await currentChangeSeq(h.deps.db));
      await new Promise((r) => setTimeout(r, 50));
    }
    t.is(replica.index.dead, 0, 'compacted');
    t.is(replica.index.effectiveFactory, 'IVF8,Flat', 'compaction reuses the trained type');
    for (let i = 0; i < 40; i++) t.false((await knn(i)).hits.some((x) => x.userId === removed[i]));
    t.is((await knn(1000)).hits[0]?.userId, users[1000]);
  } finally {
    await replica.stop();
    await db.destroy();
  }
});
