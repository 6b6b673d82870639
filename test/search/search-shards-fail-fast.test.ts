/**
 * The fail-fast gate with search shards (FAIL_FAST on, SEARCH_SHARDS=2): a shard's replicas serve its
 * consumer group of the broadcast stream, not a queue, so the gate counts the group's live consumers.
 * A shard with none answers 503 `dependency_unavailable` with Retry-After at once (identify before its
 * upload is decoded, dedupe's search before anything is sent), naming the shard, not after
 * SEARCH_SHARD_TIMEOUT_MS (10 s here). A 1:1 comparison needs no shard and is not refused. A replica
 * that joins is seen at the next request; once one stops (and the last healthy sample, reused for
 * FAIL_FAST_SAMPLE_MS, has aged), searches are refused at once again.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { hasFace } from '../../features/face/face-service.js';
import { upsertCanonical } from '../../features/face/embeddings-repository.js';
import { FACE_ENGINE_VERSION } from '../../platform/face/face-models.js';
import { AppError } from '../../platform/errors.js';
import { ROOT, useHarness, type RunningWorker } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { identifyWithFixture, jobsLeft } from '../helpers/face-path.js';
import { newConsumer, newOperator } from '../helpers/principals.js';
import { rng } from '../helpers/vectors.js';

const SHARDS = 2;
const photo = (rel: string) => readFileSync(path.join(ROOT, 'test', 'fixtures', 'faces', rel));

function unit(seed: number): number[] {
  const r = rng(seed);
  const v = Array.from({ length: 512 }, () => r() - 0.5);
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}

let shard1: RunningWorker | undefined;
const h = useHarness(test, {
  face: true,
  env: { SEARCH_SHARDS: String(SHARDS), FAIL_FAST: 'true', FAIL_FAST_RETRY_AFTER_SECONDS: '5', FAIL_FAST_SAMPLE_MS: '300', SEARCH_SHARD_TIMEOUT_MS: '10000' },
});

const startShard = (i: number) => h.startSearchWorker({ SEARCH_SHARDS: String(SHARDS), SEARCH_SHARD: String(i) });

/** Until `fn` resolves (a replica that has just started issues its first group read within moments). */
async function eventually<T>(fn: () => Promise<T>, ms = 5000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (Date.now() > until) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

test.serial('a shard with no replica: 503 at once with Retry-After naming it (identify before decoding, dedupe before sending)', async (t) => {
  await startShard(0);
  const operator = await newOperator(h);
  const probe = unit(1);

  let t0 = Date.now();
  const err = await t.throwsAsync(h.deps.face.searchByEmbedding(probe, 5));
  t.true(err instanceof AppError);
  t.is((err as AppError).code, 'dependency_unavailable');
  t.deepEqual((err as AppError).details, { reason: 'search_shard_unavailable', shards: [1] });
  t.is((err as AppError).retryAfter, 5);
  t.true(Date.now() - t0 < 1500, `answered after ${Date.now() - t0} ms, not at SEARCH_SHARD_TIMEOUT_MS (10 s)`);

  const user = await newConsumer(h);
  t0 = Date.now();
  const dedupe = await t.throwsAsync(h.deps.services.dedupe.screen(user.userId, probe, FACE_ENGINE_VERSION));
  t.is((dedupe as AppError).code, 'dependency_unavailable');
  t.true(Date.now() - t0 < 1500);

  const { res, elapsed } = await identifyWithFixture(h, operator.token);
  t.is(res.status, 503, res.text);
  t.is(res.body.error, 'dependency_unavailable');
  t.is(res.headers.get('retry-after'), '5');
  t.deepEqual(res.body.details, { reason: 'search_shard_unavailable', shards: [1] });
  t.true(elapsed < 3000, `answered after ${elapsed} ms`);
  t.is(await jobsLeft(h, 'liveness'), 0, 'the capture was not sent to the face workers');
});

test.serial('1:1 with shards needs no shard: /verify/self answers while a shard is away', async (t) => {
  const me = await newConsumer(h);
  const a = await h.deps.face.analyseCapture(photo('lfw/Bush_1.png'), 'single');
  if (!hasFace(a)) throw new Error('no face');
  const e = await h.deps.face.embedCapture(a);
  await upsertCanonical(h.deps.db, me.userId, e.embedding, 'link_nin', e.engineVersion);
  const res = await client(h.url).post('/verify/self', {
    token: me.token,
    form: { image: { data: photo('lfw/Bush_3.png'), filename: 'capture.png', type: 'image/png' } },
  });
  t.is(res.status, 200, res.text);
  t.is(res.body.outcome, 'match');
});

test.serial('a replica that joins is seen at the next request; once one stops, searches are refused at once', async (t) => {
  const user = await newConsumer(h);
  await upsertCanonical(h.deps.db, user.userId, unit(2), 'link_nin', FACE_ENGINE_VERSION);
  shard1 = await startShard(1);
  const found = await eventually(() => h.deps.face.searchByEmbedding(unit(2), 1));
  t.is(found.hits[0]?.userId, user.userId);

  await shard1.close(); // a clean stop leaves the live replicas at once
  // A healthy sample is reused for FAIL_FAST_SAMPLE_MS (300 ms here): a search within it is sent, and
  // answers 503 at the shard timeout. After it, the gate refuses at once.
  await new Promise((r) => setTimeout(r, 400));
  const t0 = Date.now();
  const err = await t.throwsAsync(h.deps.face.searchByEmbedding(unit(2), 1));
  t.deepEqual((err as AppError).details, { reason: 'search_shard_unavailable', shards: [1] });
  t.true(Date.now() - t0 < 1500, `answered after ${Date.now() - t0} ms`);
});
