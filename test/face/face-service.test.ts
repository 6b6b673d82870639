/**
 * The API's face service through the real queues, the real face worker (real ONNX models) and a real
 * search worker, on the fixture photos (test/fixtures/faces, PROVENANCE.md). The routes that call it
 * are tested with them; here the service's outcomes, codes and timings are checked directly.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { AppError, type ErrorCode } from '../../platform/errors.js';
import { FACE_ENGINE_VERSION } from '../../platform/face/face-models.js';
import { upsertCanonical } from '../../features/face/embeddings-repository.js';
import { hasFace } from '../../features/face/face-service.js';
import { useHarness, startHarness, ROOT } from '../helpers/harness.js';
import { newConsumer } from '../helpers/principals.js';

const photo = (file: string) => readFileSync(path.join(ROOT, 'test/fixtures/faces', file));

const enrolled: Record<string, string> = {};

/** Enrols the photo's face as a user's canonical embedding (through the service, as linking does). */
async function enrol(file: string): Promise<string> {
  const { userId } = await newConsumer(h);
  const a = await h.deps.face.analyseCapture(photo(file), 'single');
  if (a.outcome !== 'ok') throw new Error(`${file}: ${a.outcome}`);
  const e = await h.deps.face.embedCapture(a);
  await upsertCanonical(h.deps.db, userId, e.embedding, 'link_nin', e.engineVersion);
  return userId;
}

const h = useHarness(
  test,
  { face: true, search: 2 },
  {
    ready: async () => {
      for (const file of ['lfw/Bush_2.png', 'lfw/Powell_2.png', 'lfw/Chavez_1.png', 'grace_hopper_a.jpg']) enrolled[file] = await enrol(file);
    },
  },
);

async function rejectsWithCode(t: import('ava').ExecutionContext, p: Promise<unknown>, code: ErrorCode, status: number) {
  const err = await t.throwsAsync(p);
  t.true(err instanceof AppError, String(err));
  t.is((err as AppError).code, code);
  t.is((err as AppError).status, status);
  return err as AppError;
}

test('two photos of the same person match; photos of different people do not', async (t) => {
  const threshold = h.config.face.matchThreshold;
  const same = await h.deps.face.verifyAgainstPhoto(photo('lfw/Bush_1.png'), photo('lfw/Bush_3.png'));
  t.is(same.outcome, 'match');
  t.true(same.score! >= threshold, `genuine ${same.score}`);
  t.is(same.embedding?.embedding.length, 512);
  t.is(same.embedding?.engineVersion, FACE_ENGINE_VERSION);

  for (const [a, b] of [
    ['lfw/Bush_1.png', 'lfw/Powell_1.png'],
    ['lfw/Powell_1.png', 'lfw/Chavez_1.png'],
    ['astronaut.png', 'grace_hopper_b.jpg'],
  ] as const) {
    const diff = await h.deps.face.verifyAgainstPhoto(photo(a), photo(b));
    t.is(diff.outcome, 'face_mismatch', `${a} vs ${b}`);
    t.true(diff.score! < threshold, `${a} vs ${b}: impostor ${diff.score}`);
  }
});

test('identify finds the enrolled person first and leaves out people below the threshold', async (t) => {
  const r = await h.deps.face.identify(photo('lfw/Bush_1.png'));
  t.is(r.outcome, 'match');
  t.is(r.candidates[0]?.userId, enrolled['lfw/Bush_2.png']);
  t.is(r.candidates[0]?.rank, 1);
  t.true(r.candidates.every((c) => c.score >= h.config.face.matchThreshold));
  t.false(r.candidates.some((c) => c.userId === enrolled['lfw/Powell_2.png'] || c.userId === enrolled['lfw/Chavez_1.png']));
  t.true(r.candidates.length <= h.config.face.identifyMaxCandidates);
  // Stage timings as measured by the workers, and the whole call.
  const { liveness, embed, search, total } = r.latencyMs;
  for (const ms of [liveness, embed, search]) t.true(typeof ms === 'number' && ms > 0 && ms < total, JSON.stringify(r.latencyMs));

  const powell = await h.deps.face.identify(photo('lfw/Powell_3.png'));
  t.deepEqual(
    powell.candidates.map((c) => c.userId),
    [enrolled['lfw/Powell_2.png']],
  );

  // Nobody enrolled looks like Ariel Sharon.
  const none = await h.deps.face.identify(photo('lfw/Sharon_1.png'));
  t.is(none.outcome, 'no_match');
  t.deepEqual(none.candidates, []);
  t.true(none.topScore !== null && none.topScore < h.config.face.matchThreshold);

  // Stage histograms are fed.
  const metrics = await (await fetch(`${h.url}/metrics`)).text();
  for (const stage of ['liveness', 'embed', 'search']) t.regex(metrics, new RegExp(`face_stage_duration_seconds_count\\{stage="${stage}"\\} [1-9]`));
});

test('a corrupt upload gives 400 invalid_image, never a 500', async (t) => {
  const jpeg = photo('grace_hopper_a.jpg');
  const corrupt = {
    random: Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) % 251)),
    truncated: jpeg.subarray(0, Math.floor(jpeg.length / 3)),
    text: Buffer.from('this is not an image\n'),
    empty: Buffer.alloc(0),
  };
  for (const [name, buf] of Object.entries(corrupt)) {
    await rejectsWithCode(t, h.deps.face.identify(buf), 'invalid_image', 400);
    await rejectsWithCode(t, h.deps.face.verifyAgainstUser(buf, enrolled['lfw/Bush_2.png']!), 'invalid_image', 400);
    await rejectsWithCode(t, h.deps.face.verifyAgainstPhoto(buf, photo('lfw/Bush_2.png')), 'invalid_image', 400);
    t.log(`${name}: invalid_image`);
  }
});

test('a photo without a face gives no_face; a group photo gives multiple_faces for 1:1, its largest face for identify', async (t) => {
  const fruit = await h.deps.face.identify(photo('no_face_fruits.jpg'));
  t.is(fruit.outcome, 'no_face');
  t.deepEqual(fruit.candidates, []);
  t.is(fruit.latencyMs.embed, null);
  t.is(fruit.latencyMs.search, null);
  t.true(fruit.latencyMs.liveness! > 0);
  t.is((await h.deps.face.verifyAgainstUser(photo('no_face_fruits.jpg'), enrolled['lfw/Bush_2.png']!)).outcome, 'no_face');
  t.is((await h.deps.face.verifyAgainstPhoto(photo('no_face_fruits.jpg'), photo('lfw/Bush_2.png'))).outcome, 'no_face');

  const group = photo('group/sample2.jpg');
  const single = await h.deps.face.analyseCapture(group, 'single');
  t.is(single.outcome, 'multiple_faces');
  t.true(single.faceCount >= 2);
  t.is((await h.deps.face.verifyAgainstPhoto(group, photo('lfw/Bush_2.png'))).outcome, 'multiple_faces');
  t.is((await h.deps.face.verifyAgainstUser(group, enrolled['lfw/Bush_2.png']!)).outcome, 'multiple_faces');

  const largest = await h.deps.face.analyseCapture(group, 'largest');
  t.true(hasFace(largest));
  t.true(largest.faceCount >= 3);
  const id = await h.deps.face.identify(group);
  t.true(id.outcome === 'match' || id.outcome === 'no_match', id.outcome);
  t.true(id.faceCount >= 3);
});

// No real spoof photo exists here: this one is synthetic (see test/face-pipeline.test.ts and
// docs/face-engine.md): a held-up print made from grace_hopper_a.jpg, which the model flags.
test('a capture below the liveness threshold gives liveness_failed and is not searched', async (t) => {
  const r = await h.deps.face.identify(photo('synthetic/grace_hopper_a_held_print.jpg'));
  t.is(r.outcome, 'liveness_failed');
  t.true(r.livenessScore! < h.config.face.livenessThreshold);
  t.deepEqual(r.candidates, []);
  t.is(r.latencyMs.search, null);
});

test('1:1 against a user: the compare op, without a search', async (t) => {
  const bush = enrolled['lfw/Bush_2.png']!;
  const self = await h.deps.face.verifyAgainstUser(photo('lfw/Bush_3.png'), bush);
  t.is(self.outcome, 'match');
  t.true(self.score! >= h.config.face.matchThreshold);
  t.true(self.latencyMs.search! >= 0);
  const other = await h.deps.face.verifyAgainstUser(photo('lfw/Powell_1.png'), bush);
  t.is(other.outcome, 'no_match');
  t.true(other.score! < h.config.face.matchThreshold);

  const { userId: nobody } = await newConsumer(h);
  const none = await h.deps.face.compareWithUser(self.embedding!.embedding, nobody);
  t.is(none.score, null);
  t.is(none.reason, 'no_embedding');
});

test('with no face worker, the call fails with 503 face_engine_unavailable within the timeout, and the job never runs later', async (t) => {
  const timeoutMs = 1500;
  const h2 = await startHarness({ env: { FACE_JOB_TIMEOUT_MS: String(timeoutMs) } });
  try {
    const started = Date.now();
    const err = await rejectsWithCode(t, h2.deps.face.identify(photo('lfw/Bush_1.png')), 'face_engine_unavailable', 503);
    const elapsed = Date.now() - started;
    t.true(elapsed >= timeoutMs - 50 && elapsed < timeoutMs + 1500, `answered after ${elapsed} ms`);
    t.is(err.details?.withdrawn, true);
    const waiting = await h2.deps.jobs.counts('liveness');
    t.is(waiting.waiting + waiting.prioritized + waiting.delayed + waiting.active, 0, 'withdrawn from the queue');

    // Belt and braces: a job whose withdrawal did not happen (say Redis blinked) and whose deadline has
    // passed is skipped by the worker that picks it up.
    const stale = await h2.deps.jobs.queue('liveness').add('liveness', {
      deadlineAt: Date.now() - 1,
      payload: { imageRef: '00000000-0000-0000-0000-000000000000', mode: 'largest', resultSalt: 'k', handOffMinLiveness: 0.5 },
      replyTo: `${h2.config.redis.prefix}:jobs:reply:gone`,
    });

    const worker = await h2.startFaceWorker();
    const deadline = Date.now() + 5000;
    let health: any;
    do {
      await new Promise((r) => setTimeout(r, 100));
      health = await (await fetch(`${worker.url}/health`)).json();
    } while (health.jobs.liveness.skippedExpired < 1 && Date.now() < deadline);
    await new Promise((r) => setTimeout(r, 500)); // room for anything else to (wrongly) run
    health = await (await fetch(`${worker.url}/health`)).json();
    t.is(health.jobs.liveness.started, 0, 'no liveness job ran');
    t.is(health.jobs.embed.started, 0, 'no embed job ran');
    t.is(health.jobs.liveness.skippedExpired, 1);
    const after = await h2.deps.jobs.counts('liveness');
    t.is(after.completed, 0);
    t.is(after.waiting + after.active, 0);
    const kept = await h2.deps.jobs.queue('liveness').getJob(stale.id!);
    t.is(kept?.data.payload ?? null, null, 'the skipped job no longer carries the image');

    // And the worker does serve a fresh request.
    const ok = await h2.deps.face.analyseCapture(photo('lfw/Bush_1.png'), 'largest');
    t.is(ok.outcome, 'ok');
  } finally {
    await h2.stop();
  }
});
