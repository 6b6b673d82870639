/**
 * Search shards (SPEC 14.3), with real processes' code in-process: the web process with SEARCH_SHARDS=3,
 * three shard search workers (real FAISS / BinarySketch replicas, real Redis stream, real PostgreSQL)
 * and, beside them, a single-index search worker (SEARCH_SHARDS=1) serving the `search` queue, so the
 * same population is searched both ways in one run: the merged answer (candidates, order, scores) must
 * be the single index's for every probe. Then a shard's replicas stopped: 503 with Retry-After (identify,
 * dedupe's search), never a partial list; answers again when it returns.
 */
import test from 'ava';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { SnapshotStore, type SnapshotMeta } from '../../features/search/worker/snapshot-store.js';
import { snapshotUserIds } from '../../features/search/worker/sketch-engine.js';
import { issueProofToken } from '../../features/verification/proof-tokens.js';
import path from 'node:path';
import { FaceService, hasFace } from '../../features/face/face-service.js';
import { currentChangeSeq, removeCanonical, upsertCanonical } from '../../features/face/embeddings-repository.js';
import { FACE_ENGINE_VERSION } from '../../platform/face/face-models.js';
import { HandoffSealer } from '../../platform/face-path/sealing.js';
import { shardOf } from '../../platform/jobs/search-shards.js';
import { AppError } from '../../platform/errors.js';
import { ROOT, useHarness, type RunningWorker } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer, newOperator } from '../helpers/principals.js';
import { atCosine, rng } from '../helpers/vectors.js';

const SHARDS = 3;
const ERASURE_MAX_SECONDS = 6;
const DIM = 512;
const POPULATION = 450;

function unit(seed: number): number[] {
  const r = rng(seed);
  const v = Array.from({ length: DIM }, () => r() - 0.5);
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}

const photo = (rel: string) => readFileSync(path.join(ROOT, 'test', 'fixtures', 'faces', rel));
const png = (data: Buffer) => ({ data, filename: 'capture.png', type: 'image/png' });

const shardWorkers: (RunningWorker | undefined)[] = [];
let single: FaceService;
const users: string[] = [];

const startShard = (i: number, count = SHARDS) => h.startSearchWorker({ SEARCH_SHARDS: String(count), SEARCH_SHARD: String(i) });

// Every process of the test runs in this one (one event loop): a burst of searches queues its
// 3 × 24 replies and the replicas' engine calls behind each other, so the shard timeout has room here.
const h = useHarness(
  test,
  {
    face: true,
    env: {
      SEARCH_SHARDS: String(SHARDS),
      SEARCH_SHARD_TIMEOUT_MS: '3000',
      IDENTIFY_MATCH_THRESHOLD: '0.7',
      SEARCH_EXACT_CANDIDATES: '0',
      // The replicas look every third of it (2 s here), leaving a rewrite of every shard's snapshot 4 s
      // on the test's loaded cores (5 search processes and the suite's other files beside them).
      ERASURE_MAX_SECONDS: String(ERASURE_MAX_SECONDS),
    },
  },
  { ready: () => setUp() },
);

async function setUp(): Promise<void> {
  // The population: random identities, written through the change path.
  for (let i = 0; i < POPULATION; i += 50) {
    const batch = await Promise.all(Array.from({ length: Math.min(50, POPULATION - i) }, () => newConsumer(h)));
    await Promise.all(batch.map((u, j) => upsertCanonical(h.deps.db, u.userId, unit(1000 + i + j), 'link_nin', FACE_ENGINE_VERSION)));
    users.push(...batch.map((u) => u.userId));
  }
  for (let i = 0; i < SHARDS; i++) shardWorkers[i] = await startShard(i);
  // The single index over the same rows, answering the `search` queue, and a face service of a
  // one-shard web process in front of it (the same job client, key ring and database).
  await h.startSearchWorker({ SEARCH_SHARDS: '1' });
  const config = h.configFor({ SEARCH_SHARDS: '1' });
  single = new FaceService({
    config,
    embeddings: h.deps.repos.embeddings,
    jobs: h.deps.jobs,
    sealer: new HandoffSealer(h.deps.keyRing),
    metrics: h.deps.metrics,
  });
}

const health = async (w: RunningWorker) => (await (await fetch(`${w.url}/health`)).json()) as { size: number; shard: { index: number; count: number } };

test.serial('each shard holds only its rows: the hash of the user id, the same in PostgreSQL and in the service', async (t) => {
  const expected = Array.from({ length: SHARDS }, (_, i) => users.filter((u) => shardOf(u, SHARDS) === i).length);
  const sizes = await Promise.all(shardWorkers.map(async (w) => (await health(w!)).size));
  t.deepEqual(sizes, expected);
  t.is(
    sizes.reduce((a, b) => a + b, 0),
    POPULATION,
  );
  t.true(Math.min(...sizes) > POPULATION / SHARDS / 2, `the hash spreads the rows: ${sizes.join(', ')}`);
  t.deepEqual((await health(shardWorkers[1]!)).shard, { index: 1, count: SHARDS });
});

/** Exact search over the test's population (every row scored here, in double precision): the reference. */
function exactTopK(probe: number[], k: number): { userId: string; score: number }[] {
  const pn = Math.hypot(...probe);
  return users
    .map((userId, i) => ({ userId, score: unit(1000 + i).reduce((acc, x, j) => acc + x * probe[j]!, 0) / pn }))
    .sort((a, b) => b.score - a.score)
    .slice(0, k);
}

test.serial('the merged answer is the single index’s for every probe: the whole list (candidates, order, scores), and it is exact search', async (t) => {
  const r = rng(7);
  for (let p = 0; p < 40; p++) {
    // A "second photo" of an enrolled person (cosine 0.5-0.9), or nobody.
    const mate = p % 4 === 3 ? null : Math.floor(r() * POPULATION);
    const probe = mate === null ? unit(900_000 + p) : atCosine(unit(1000 + mate), unit(500_000 + p), 0.5 + 0.4 * r());
    // k up to 20: the tail of impostors (cosine ≈ 0.1) is compared as well as the mate.
    const k = 1 + (p % 20);
    const [sharded, one] = await Promise.all([h.deps.face.searchByEmbedding(probe, k), single.searchByEmbedding(probe, k)]);
    t.deepEqual(sharded.hits, one.hits, `probe ${p}`);
    t.is(sharded.hits.length, k);
    if (mate !== null) t.is(sharded.hits[0]!.userId, users[mate]);
    t.is(sharded.indexSize, one.indexSize);
    // Not two lists equally wrong: every rank is exact search's (users and order; scores to float32).
    const exact = exactTopK(probe, k);
    t.deepEqual(
      sharded.hits.map((x) => x.userId),
      exact.map((x) => x.userId),
      `probe ${p}: the exact top ${k}`,
    );
    sharded.hits.forEach((x, i) => t.true(Math.abs(x.score - exact[i]!.score) < 1e-5, `probe ${p} rank ${i}: ${x.score} vs ${exact[i]!.score}`));
  }
  // A dedupe search leaves the user linking out, on every shard.
  const me = users[17]!;
  const [sharded, one] = await Promise.all([
    h.deps.face.searchByEmbedding(unit(1017), 5, undefined, undefined, me),
    single.searchByEmbedding(unit(1017), 5, undefined, undefined, me),
  ]);
  t.false(sharded.hits.some((x) => x.userId === me));
  t.deepEqual(sharded.hits, one.hits);
});

test.serial('read-your-writes across shards: a write that answered is found at once, a removal is gone at once', async (t) => {
  const u = await newConsumer(h);
  await upsertCanonical(h.deps.db, u.userId, unit(77_777), 'link_nin', FACE_ENGINE_VERSION);
  const found = await h.deps.face.searchByEmbedding(unit(77_777), 1);
  t.is(found.hits[0]?.userId, u.userId);
  t.true(BigInt(found.appliedSeq) >= BigInt(await currentChangeSeq(h.deps.db)));
  await removeCanonical(h.deps.db, u.userId);
  t.false((await h.deps.face.searchByEmbedding(unit(77_777), 5)).hits.some((x) => x.userId === u.userId));
});

test.serial('/identify and /verify/self through the API on real photos: the same candidates as the single index', async (t) => {
  const bush = await newConsumer(h);
  const a = await h.deps.face.analyseCapture(photo('lfw/Bush_1.png'), 'single');
  if (!hasFace(a)) throw new Error('no face');
  const e = await h.deps.face.embedCapture(a);
  await upsertCanonical(h.deps.db, bush.userId, e.embedding, 'link_nin', e.engineVersion);
  const operator = await newOperator(h);
  const res = await client(h.url).post('/identify', { token: operator.token, form: { attestation: 'true', file: png(photo('lfw/Bush_2.png')) } });
  t.is(res.status, 200, res.text);
  t.is(res.body.outcome, 'match');
  t.is(res.body.candidates[0].userId, bush.userId);
  const one = await single.identify(photo('lfw/Bush_2.png'));
  t.deepEqual(
    res.body.candidates.map((c: { userId: string; score: number; rank: number }) => ({ userId: c.userId, score: c.score, rank: c.rank })),
    one.candidates.map((c) => ({ userId: c.userId, score: c.score, rank: c.rank })),
  );
  // 1:1 needs no shard: the same score as the single index's `compare`.
  const self = await client(h.url).post('/verify/self', { token: bush.token, form: { image: png(photo('lfw/Bush_3.png')) } });
  t.is(self.status, 200, self.text);
  t.is(self.body.outcome, 'match');
  t.is(self.body.score, (await single.verifyAgainstUser(photo('lfw/Bush_3.png'), bush.userId)).score);
});

test.serial('a shard with no replica: 503 dependency_unavailable with Retry-After, never a partial list; answers again when it returns', async (t) => {
  const operator = await newOperator(h);
  const probe = unit(1000 + 5);
  const before = await h.deps.face.searchByEmbedding(probe, 10);
  await shardWorkers[1]!.close();
  shardWorkers[1] = undefined;

  const t0 = Date.now();
  const err = await t.throwsAsync(h.deps.face.searchByEmbedding(probe, 10));
  t.true(err instanceof AppError);
  t.is((err as AppError).code, 'dependency_unavailable');
  t.deepEqual((err as AppError).details, { reason: 'search_shard_unavailable', shards: [1] });
  t.true(Date.now() - t0 < 4500, 'answered at SEARCH_SHARD_TIMEOUT_MS, not at the job deadline (FACE_JOB_TIMEOUT_MS 15 s here)');
  // Dedupe at link searches the same way (the watch-list answer goes with it).
  const dedupe = await t.throwsAsync(h.deps.services.dedupe.screen(users[0]!, probe, FACE_ENGINE_VERSION));
  t.is((dedupe as AppError).code, 'dependency_unavailable', 'a link is not screened against a part of the gallery');

  const res = await client(h.url).post('/identify', { token: operator.token, form: { attestation: 'true', file: png(photo('lfw/Bush_2.png')) } });
  t.is(res.status, 503, res.text);
  t.is(res.body.error, 'dependency_unavailable');
  t.truthy(res.headers.get('retry-after'));
  // An administrator's /health names the shard without a replica (its idle consumer ages out first).
  const admin = await newOperator(h, { role: 'administrator' });
  const vectorIndex = async () =>
    ((await client(h.url).get('/health', { token: admin.token })).body as { dependencies: { vector_index: { up: boolean; detail: unknown } } }).dependencies
      .vector_index;
  const until = Date.now() + 10_000;
  let vi = await vectorIndex();
  while (vi.up && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 500));
    vi = await vectorIndex();
  }
  t.false(vi.up);
  t.regex(String(vi.detail), /shard\(s\) 1 without a replica/);

  shardWorkers[1] = await startShard(1);
  const after = await h.deps.face.searchByEmbedding(probe, 10);
  t.deepEqual(after.hits, before.hits);
  const back = await vectorIndex();
  t.true(back.up, JSON.stringify(back));
  t.deepEqual((back.detail as { shards: unknown }).shards, [
    { shard: 0, replicas: 1 },
    { shard: 1, replicas: 1 },
    { shard: 2, replicas: 1 },
  ]);
});

test.serial('two replicas of a shard share its searches; one stopped, the other answers alone', async (t) => {
  const extra = await startShard(2);
  const probes = Array.from({ length: 24 }, (_, i) => unit(1000 + i));
  const expected = await Promise.all(probes.map((p) => single.searchByEmbedding(p, 3)));
  const got = await Promise.all(probes.map((p) => h.deps.face.searchByEmbedding(p, 3)));
  t.deepEqual(
    got.map((g) => g.hits),
    expected.map((e) => e.hits),
  );
  await shardWorkers[2]!.close();
  shardWorkers[2] = extra;
  const alone = await h.deps.face.searchByEmbedding(probes[3]!, 3);
  t.deepEqual(alone.hits, expected[3]!.hits);
});

/** Every snapshot on disk: its lineage and the user ids it lists (decrypted with the deployment's ring). */
async function snapshots(): Promise<{ lineage: string; ids: string[] }[]> {
  const dir = h.config.search.snapshotDir;
  const store = new SnapshotStore(dir, h.deps.keyRing);
  const out: { lineage: string; ids: string[] }[] = [];
  for (const d of existsSync(dir) ? readdirSync(dir).filter((x) => x.startsWith('snap-')) : []) {
    const meta = path.join(dir, d, 'meta.json');
    try {
      const m = JSON.parse(readFileSync(meta, 'utf8')) as SnapshotMeta;
      out.push({ lineage: m.logId, ids: await snapshotUserIds(store.reader({ dir: path.dirname(meta), meta: m })) });
    } catch (e) {
      if (existsSync(meta)) throw e; // retired meanwhile: skipped
    }
  }
  return out;
}

test.serial(
  'erasure reaches every shard: gone from the merged answer at once, from every shard’s snapshots within ERASURE_MAX_SECONDS, then user.erased',
  async (t) => {
    const user = await newConsumer(h);
    await upsertCanonical(h.deps.db, user.userId, unit(55_555), 'link_nin', FACE_ENGINE_VERSION);
    t.is((await h.deps.face.searchByEmbedding(unit(55_555), 1)).hits[0]?.userId, user.userId);
    const { proofToken } = await issueProofToken(h.deps, user.userId, user.sessionId);
    const erasedFrom = Date.now();
    const del = await client(h.url).delete(`/users/${user.userId}`, { token: user.token, json: { proofToken } });
    t.is(del.status, 200, del.text);
    t.false((await h.deps.face.searchByEmbedding(unit(55_555), 10)).hits.some((x) => x.userId === user.userId));

    const t0 = Date.now();
    let receipt;
    while (!(receipt = await h.deps.db('auditEvents').where({ type: 'user.erased', subjectId: user.userId }).first()) && Date.now() - t0 < 15_000)
      await new Promise((r) => setTimeout(r, 200));
    t.truthy(receipt, 'user.erased once every shard (and the single index beside them) rewrote its snapshots');
    // Within ERASURE_MAX_SECONDS of the DELETE, on every shard (the receipt waits for all).
    const receiptMs = new Date(receipt.createdAt as string | Date).getTime() - erasedFrom;
    t.true(receiptMs <= ERASURE_MAX_SECONDS * 1000, `user.erased ${receiptMs} ms after the DELETE`);
    const all = await snapshots();
    for (let i = 0; i < SHARDS; i++)
      t.true(
        all.some((x) => x.lineage.endsWith(`-s${i}of${SHARDS}`)),
        `shard ${i} keeps a snapshot of its own lineage`,
      );
    t.false(
      all.some((x) => x.ids.includes(user.userId)),
      'no snapshot of any shard lists the erased user',
    );
    // A shard's snapshot lists only its own users.
    for (const x of all) {
      const m = /-s(\d+)of(\d+)$/.exec(x.lineage);
      if (m) t.true(x.ids.every((id) => shardOf(id, Number(m[2])) === Number(m[1])));
    }
  },
);
