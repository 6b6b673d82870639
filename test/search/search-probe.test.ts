/**
 * The probe embedding of a search job never sits in clear in Redis and never outlives the request's
 * deadline: it waits sealed beside the job (platform/face-path/search-embedding.ts), the job carries only
 * its ref and the salt of its key (the key needs the processes' key ring too), and the value expires at the deadline even when no search worker ever takes it.
 */
import test from 'ava';
import { EMBEDDING_DIM, encodeEmbedding } from '../../platform/face/embeddings.js';
import { AppError } from '../../platform/errors.js';
import { handoffKey } from '../../platform/face-path/handoff.js';
import { createDecipheriv } from 'node:crypto';
import { keyRingOf } from '../../platform/keys/templates.js';
import { HandoffSealer } from '../../platform/face-path/sealing.js';
import { createRedis } from '../../platform/redis/redis.js';
import { upsertCanonical } from '../../features/face/embeddings-repository.js';
import { FACE_ENGINE_VERSION } from '../../platform/face/face-models.js';
import { useHarness } from '../helpers/harness.js';
import { newConsumer } from '../helpers/principals.js';

const h = useHarness(test, { env: { FAIL_FAST: 'false' } });

/** A unit vector with a recognisable pattern (its float32 bytes are searched for in Redis). */
const probe = Array.from({ length: EMBEDDING_DIM }, (_, i) => (i % 7) - 3 + 0.125);
const norm = Math.hypot(...probe);
const unitProbe = probe.map((x) => x / norm);

test.serial('with no search worker, the job holds a ref and a salt only, and the sealed probe is gone at the deadline', async (t) => {
  const redis = createRedis(h.config.redis.url);
  t.teardown(() => redis.disconnect());
  const deadlineAt = Date.now() + 1500;
  const pending = h.deps.face.searchByEmbedding(unitProbe, 5, deadlineAt);
  pending.catch(() => {});

  let job: Awaited<ReturnType<ReturnType<typeof h.deps.jobs.queue>['getWaiting']>>[number] | undefined;
  for (let i = 0; i < 50 && !job; i++) {
    job = (await h.deps.jobs.queue('search').getWaiting())[0];
    if (!job) await new Promise((r) => setTimeout(r, 20));
  }
  if (!job) return t.fail('the search job never appeared');
  const payload = (job.data as { payload: Record<string, unknown> }).payload;
  t.deepEqual(Object.keys(payload).sort(), ['embeddingRef', 'embeddingSalt', 'k', 'minSeq', 'op']);

  const valueKey = handoffKey(h.config.redis.prefix, 'embedding', payload.embeddingRef as string);
  const sealed = await redis.getBuffer(valueKey);
  if (!sealed) return t.fail('no sealed probe beside the job');
  const clear = encodeEmbedding(unitProbe);
  t.false(sealed.includes(clear.subarray(0, 64)), 'the value is not the embedding in clear');
  // The payload's salt is not a key: used as one (the way hand-offs were once sealed) it opens nothing.
  const salt = payload.embeddingSalt as string;
  t.throws(() => {
    const d = createDecipheriv('aes-256-gcm', Buffer.from(salt, 'base64'), sealed.subarray(0, 12));
    d.setAuthTag(sealed.subarray(12, 28));
    return Buffer.concat([d.update(sealed.subarray(28)), d.final()]);
  });
  const ring = keyRingOf(h.config);
  t.deepEqual(new HandoffSealer(ring).open(sealed, salt), clear, 'the key ring with the job salt opens it to the probe');
  // The time left is read before the TTL. The job client re-derives the deadline from the time left
  // when it adds the job (face-service passes a timeout), so on a loaded machine the value may outlive
  // the caller's deadline by the few hundred ms spent before the add; never by a job's lifetime.
  const leftBefore = deadlineAt - Date.now();
  const pttl = await redis.pttl(valueKey);
  const expiresAt = Date.now() + pttl;
  t.true(pttl > 0 && pttl <= leftBefore + 500, `expires at the deadline (pttl ${pttl} ms)`);

  const err = await t.throwsAsync(pending);
  t.is((err as AppError).code, 'face_engine_unavailable');
  // It expires when Redis said it would (within the bound above of the caller's deadline), whether or not anyone takes it.
  await new Promise((r) => setTimeout(r, Math.max(0, expiresAt + 25 - Date.now())));
  t.is(await redis.exists(valueKey), 0, 'the sealed probe is gone at the deadline');
});

test.serial('a search worker takes the sealed probe once and answers with it; a 1:1 comparison needs none', async (t) => {
  const redis = createRedis(h.config.redis.url);
  t.teardown(() => redis.disconnect());
  await h.startSearchWorker();
  const { userId } = await newConsumer(h);
  await upsertCanonical(h.deps.db, userId, unitProbe, 'link_nin', FACE_ENGINE_VERSION);
  const same = await h.deps.face.compareWithUser(unitProbe, userId);
  t.is(same.score, 1);
  const knn = await h.deps.face.searchByEmbedding(unitProbe, 1);
  t.is(knn.hits[0]?.userId, userId);
  t.deepEqual(await redis.keys(handoffKey(h.config.redis.prefix, 'embedding', '*')), [], 'no probe left in Redis');
});
