/**
 * /identify, its escalation and /verify/self end to end: HTTP, queues, the real face and search
 * workers, real photos. Enrolment here goes through the canonical-embedding change path directly (the
 * linking flow has its own end-to-end tests, which also identify a freshly linked user).
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import sharp from 'sharp';
import path from 'node:path';
import { upsertCanonical } from '../../features/face/embeddings-repository.js';
import { hasFace } from '../../features/face/face-service.js';
import { ROOT, useHarness, type Harness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer, newOperator } from '../helpers/principals.js';

const photo = (rel: string) => readFileSync(path.join(ROOT, 'test', 'fixtures', 'faces', rel));
const file = (rel: string) => ({ data: photo(rel), filename: path.basename(rel), type: rel.endsWith('.png') ? 'image/png' : 'image/jpeg' });

let bush: { userId: string; token: string };
let powell: { userId: string; token: string };
let operator: { operatorId: string; token: string };

async function enrol(h: Harness, userId: string, rel: string): Promise<void> {
  const a = await h.deps.face.analyseCapture(photo(rel), 'single');
  if (!hasFace(a)) throw new Error(`no face in ${rel}`);
  const e = await h.deps.face.embedCapture(a);
  await upsertCanonical(h.deps.db, userId, e.embedding, 'link_nin', e.engineVersion);
}

const logCount = async () => Number((await h.deps.db('searchLogs').count({ n: '*' }).first())!.n);

const h = useHarness(
  test,
  { face: true, search: 1 },
  {
    ready: async () => {
      bush = await newConsumer(h);
      powell = await newConsumer(h);
      operator = await newOperator(h);
      await enrol(h, bush.userId, 'lfw/Bush_1.png');
      await enrol(h, powell.userId, 'lfw/Powell_1.png');
    },
  },
);

test.serial('identify finds the enrolled person from another photo, logs the call with its latency breakdown', async (t) => {
  const res = await client(h.url).post('/identify', { token: operator.token, form: { attestation: 'true', file: file('lfw/Bush_2.png') } });
  t.is(res.status, 200, res.text);
  t.is(res.body.outcome, 'match');
  t.is(res.body.candidates[0].userId, bush.userId);
  t.is(res.body.candidates[0].rank, 1);
  t.true(res.body.candidates[0].score >= h.config.face.matchThreshold);
  t.false(res.body.candidates.some((c: { userId: string }) => c.userId === powell.userId));
  for (const stage of ['liveness', 'embed', 'search', 'total']) t.is(typeof res.body.latencyMs[stage], 'number', stage);

  const row = await h.deps.db('searchLogs').where({ id: res.body.referenceId }).first();
  t.is(row.kind, 'identify');
  t.is(row.operatorId, operator.operatorId);
  t.is(row.outcome, 'match');
  t.deepEqual(row.matchedUserIds, [bush.userId]);
  t.deepEqual(Object.keys(row.latencyMs).sort(), ['embed', 'liveness', 'search', 'total']);
  t.is(row.escalatedAt, null);
});

test.serial('identify of someone not enrolled is no_match with no candidates', async (t) => {
  const res = await client(h.url).post('/identify', { token: operator.token, form: { attestation: 'true', file: file('lfw/Chavez_1.png') } });
  t.is(res.status, 200);
  t.is(res.body.outcome, 'no_match');
  t.deepEqual(res.body.candidates, []);
});

test.serial('without attestation=true the call is refused first, with nothing logged', async (t) => {
  const api = client(h.url);
  const before = await logCount();
  for (const form of [
    { file: file('lfw/Bush_2.png') },
    { attestation: 'false', file: file('lfw/Bush_2.png') },
    { attestation: 'TRUE' },
    { attestation: 'yes', extra: 'x' },
  ] as const) {
    const res = await api.post('/identify', { token: operator.token, form: form as never });
    t.is(res.status, 400);
    t.is(res.body.error, 'attestation_required');
    t.is(res.body.outcome, 'attestation_required');
  }
  // No multipart body at all: no attestation either, and that is answered first (not 415).
  for (const opts of [
    {},
    { json: { attestation: 'true' } },
    { rawBody: 'attestation=true', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
  ]) {
    const res = await api.post('/identify', { token: operator.token, ...opts });
    t.is(res.status, 400, JSON.stringify(opts));
    t.is(res.body.error, 'attestation_required', JSON.stringify(opts));
  }
  t.is(await logCount(), before);
  // Still an operator route: no token is 401 before anything else.
  t.is((await api.post('/identify', { form: { attestation: 'false' } })).status, 401);
});

test.serial('every face outcome and failure of /identify writes exactly one SearchLog row', async (t) => {
  const api = client(h.url);
  const cases = [
    { rel: 'no_face_fruits.jpg', status: 200, outcome: 'no_face' },
    { rel: 'synthetic/grace_hopper_a_held_print.jpg', status: 200, outcome: 'liveness_failed' },
  ];
  for (const c of cases) {
    const before = await logCount();
    const res = await api.post('/identify', { token: operator.token, form: { attestation: 'true', file: file(c.rel) } });
    t.is(res.status, c.status, c.rel);
    t.is(res.body.outcome, c.outcome, c.rel);
    t.is(await logCount(), before + 1);
    const row = await h.deps.db('searchLogs').where({ id: res.body.referenceId }).first();
    t.is(row.outcome, c.outcome);
  }
  const before = await logCount();
  const corrupt = await api.post('/identify', {
    token: operator.token,
    form: { attestation: 'true', file: { data: Buffer.from('not an image at all'), filename: 'x.jpg' } },
  });
  t.is(corrupt.status, 400);
  t.is(corrupt.body.error, 'invalid_image');
  t.is(corrupt.body.outcome, 'invalid_image');
  t.is(await logCount(), before + 1);
  const row = await h.deps.db('searchLogs').orderBy('createdAt', 'desc').first();
  t.is(row.outcome, 'invalid_image');
  t.is(row.operatorId, operator.operatorId);
});

test.serial('a group photo is identified by its largest face, never refused as several faces', async (t) => {
  const res = await client(h.url).post('/identify', { token: operator.token, form: { attestation: 'true', file: file('group/sample1.jpg') } });
  t.is(res.status, 200);
  t.true(['match', 'no_match', 'liveness_failed'].includes(res.body.outcome));
});

test.serial('escalate sets escalatedAt once; a second call keeps the first time', async (t) => {
  const api = client(h.url);
  const id = (await api.post('/identify', { token: operator.token, form: { attestation: 'true', file: file('lfw/Powell_2.png') } })).body.referenceId;
  const first = await api.post(`/identify/${id}/escalate`, { token: operator.token });
  t.is(first.status, 200);
  t.is(first.body.referenceId, id);
  t.truthy(Date.parse(first.body.escalatedAt));
  await new Promise((r) => setTimeout(r, 20));
  const second = await api.post(`/identify/${id}/escalate`, { token: operator.token });
  t.is(second.status, 200);
  t.is(second.body.escalatedAt, first.body.escalatedAt);
  const audits = await h.deps.db('auditEvents').where({ type: 'identify.escalated', subjectId: id });
  t.is(audits.length, 1);

  t.is((await api.post('/identify/00000000-0000-4000-8000-000000000000/escalate', { token: operator.token })).status, 404);
  t.is((await api.post(`/identify/${id}/escalate`, { token: bush.token })).status, 401);
  const otherOrg = await newOperator(h, { orgId: 'another-bank' });
  t.is((await api.post(`/identify/${id}/escalate`, { token: otherOrg.token })).status, 404);
});

test.serial('verify/self: a match returns a single-use proofToken and logs the call', async (t) => {
  const api = client(h.url);
  const res = await api.post('/verify/self', { token: bush.token, form: { image: file('lfw/Bush_3.png') } });
  t.is(res.status, 200, res.text);
  t.is(res.body.outcome, 'match');
  t.true(res.body.score >= h.config.face.matchThreshold);
  t.is(typeof res.body.proofToken, 'string');
  t.is(res.body.expiresIn, h.config.identity.proofTokenTtlSeconds);
  const row = await h.deps.db('searchLogs').where({ id: res.body.referenceId }).first();
  t.is(row.kind, 'verify_self');
  t.is(row.userId, bush.userId);
  t.is(row.outcome, 'match');
});

test.serial('verify/self: another face is no_match without a proofToken; no face and failed liveness are outcomes', async (t) => {
  const api = client(h.url);
  const other = await api.post('/verify/self', { token: powell.token, form: { image: file('lfw/Bush_2.png') } });
  t.is(other.status, 200);
  t.is(other.body.outcome, 'no_match');
  t.is(other.body.proofToken, undefined);
  // SPEC 12.1: a failed comparison carries no score (no oracle to climb on).
  t.false('score' in other.body);
  const fruit = await api.post('/verify/self', { token: powell.token, form: { image: file('no_face_fruits.jpg') } });
  t.is(fruit.body.outcome, 'no_face');
  const print = await api.post('/verify/self', { token: powell.token, form: { image: file('synthetic/grace_hopper_a_held_print.jpg') } });
  t.is(print.body.outcome, 'liveness_failed');
  t.is(print.body.proofToken, undefined);
  t.false('score' in print.body);
});

test.serial(
  'verify/self: a JPEG selfie goes to its job as it came: turned by its orientation tag it matches upright; one that breaks past its header is 400 invalid_image, logged',
  async (t) => {
    const api = client(h.url);
    const upright = await sharp(photo('lfw/Bush_3.png')).jpeg({ quality: 92 }).toBuffer();
    // Stored sideways with the tag that turns it back: only a decode that applies the tag sees the face upright.
    const sideways = await sharp(await sharp(upright).rotate(270).toBuffer())
      .withMetadata({ orientation: 6 })
      .jpeg({ quality: 92 })
      .toBuffer();
    const turned = await api.post('/verify/self', { token: bush.token, form: { image: { data: sideways, filename: 'selfie.jpg', type: 'image/jpeg' } } });
    t.is(turned.status, 200, turned.text);
    t.is(turned.body.outcome, 'match');
    const before = await logCount();
    const broken = Buffer.concat([upright.subarray(0, Math.floor(upright.length / 2)), Buffer.alloc(64, 0x55)]);
    const res = await api.post('/verify/self', { token: bush.token, form: { image: { data: broken, filename: 'selfie.jpg', type: 'image/jpeg' } } });
    t.is(res.status, 400, res.text);
    t.is(res.body.error, 'invalid_image');
    t.is(await logCount(), before + 1, 'the failed call is logged as any');
  },
);

test.serial('a high-confidence verify/self refreshes the canonical embedding through the change path', async (t) => {
  const gh = await newConsumer(h);
  await enrol(h, gh.userId, 'grace_hopper_a.jpg');
  const before = await h.deps.db('canonicalEmbeddings').where({ userId: gh.userId }).first();
  const res = await client(h.url).post('/verify/self', { token: gh.token, form: { image: file('grace_hopper_b.jpg') } });
  t.is(res.body.outcome, 'match');
  t.true(res.body.score >= h.config.face.highConfidenceThreshold);
  const after = await h.deps.db('canonicalEmbeddings').where({ userId: gh.userId }).first();
  t.is(after.source, 'verify_self');
  t.notDeepEqual(after.embedding, before.embedding);
  const changes = await h.deps.db('embeddingChanges').where({ userId: gh.userId, op: 'upsert' });
  t.is(changes.length, 2);
});

test.serial('verify/self without an enrolled face is 409 conflict; a deleted user is 404', async (t) => {
  const api = client(h.url);
  const fresh = await newConsumer(h);
  const res = await api.post('/verify/self', { token: fresh.token, form: { image: file('lfw/Bush_2.png') } });
  t.is(res.status, 409);
  t.is(res.body.error, 'conflict');
  t.is(res.body.outcome, 'conflict');
  await h.deps.db('users').where({ id: fresh.userId }).update({ deletedAt: new Date() });
  const gone = await api.post('/verify/self', { token: fresh.token, form: { image: file('lfw/Bush_2.png') } });
  t.is(gone.status, 404);
  t.is(gone.body.error, 'not_found');
  // The authorisation layer's answer is echoed too (error bodies of /verify/self carry `outcome`).
  t.is(gone.body.outcome, 'not_found');
  // The wrong field name is a schema error, not a face outcome.
  const wrong = await api.post('/verify/self', { token: bush.token, form: { file: file('lfw/Bush_2.png') } });
  t.is(wrong.status, 400);
  t.is(wrong.body.error, 'validation_failed');
  t.is(wrong.body.outcome, 'validation_failed');
  // Not multipart: still 415 (a JSON route's error shape, with the outcome echoed).
  const json = await api.post('/verify/self', { token: bush.token, json: {} });
  t.is(json.status, 415);
  t.is(json.body.error, 'unsupported_media_type');
});

test.serial(
  'no face image, aligned face or embedding lingers in Redis after an identify (job hashes, hand-offs and replies gone; no result in any events stream)',
  async (t) => {
    const res = await client(h.url).post('/identify', { token: operator.token, form: { attestation: 'true', file: file('lfw/Powell_3.png') } });
    t.is(res.status, 200);
    const redis = h.deps.redis;
    const prefix = `${h.config.redis.prefix}:bull`;
    const keys = await redis.keys(`${prefix}:*`);
    // Only queue bookkeeping remains: no per-job hash (`<queue>:<id>`) of any face queue.
    const jobHashes = keys.filter((k) => /:(liveness|embed|search):\d+$/.test(k));
    t.deepEqual(jobHashes, []);
    const imageB64 = photo('lfw/Powell_3.png').toString('base64').slice(0, 40);
    for (const queue of ['liveness', 'embed', 'search']) {
      const entries = (await redis.xrange(`${prefix}:${queue}:events`, '-', '+')) as [string, string[]][];
      const text = JSON.stringify(entries);
      t.false(text.includes(imageB64), `${queue} events hold no image`);
      // A clear embedding would be a long array of floats in a returnvalue.
      t.false(/\[(-?\d\.\d+,){100,}/.test(text), `${queue} events hold no clear embedding`);
    }
    // Results travel on the API's reply list, read as they arrive: the events streams carry none. (An
    // identify's only BullMQ job is its liveness job; its search went on the follow-on list.)
    for (const queue of ['liveness', 'embed', 'search']) {
      const entries = (await redis.xrange(`${prefix}:${queue}:events`, '-', '+')) as [string, string[]][];
      const completed = entries.filter(([, f]) => f[1] === 'completed');
      if (queue === 'liveness') t.true(completed.length > 0, `${queue}: completed events`);
      for (const [, f] of completed) t.is(f[f.indexOf('returnvalue') + 1], 'null', `${queue}: no result in the stream`);
    }
    // The image and the probe were taken by the workers that read them, the search stage was taken off
    // its list, and no reply waits on a list.
    t.deepEqual(await redis.keys(`${h.config.redis.prefix}:face:*`), []);
    t.deepEqual(await redis.keys(`${h.config.redis.prefix}:jobs:list:*`), []);
    t.deepEqual(await redis.keys(`${h.config.redis.prefix}:jobs:reply:*`), []);
  },
);

test.serial('identify never returns a deleted account still in the index: ranks renumbered, logged without it, alone it is no_match', async (t) => {
  // Deleted behind the index's back (the row only): the index still holds the embeddings.
  const ghost = await newConsumer(h);
  await enrol(h, ghost.userId, 'lfw/Powell_1.png');
  const hopper = await newConsumer(h);
  await enrol(h, hopper.userId, 'grace_hopper_a.jpg');
  const before = await client(h.url).post('/identify', { token: operator.token, form: { attestation: 'true', file: file('lfw/Powell_2.png') } });
  t.is(before.status, 200, before.text);
  t.deepEqual(before.body.candidates.map((c: { userId: string }) => c.userId).sort(), [powell.userId, ghost.userId].sort());
  const hopperBefore = await client(h.url).post('/identify', { token: operator.token, form: { attestation: 'true', file: file('grace_hopper_b.jpg') } });
  const hopperIds = hopperBefore.body.candidates.map((c: { userId: string }) => c.userId) as string[];
  t.true(hopperIds.includes(hopper.userId));
  t.false(hopperIds.includes(powell.userId));
  // Every account that matches the second Hopper photo is deleted (another test may have enrolled her too).
  await h.deps
    .db('users')
    .whereIn('id', [ghost.userId, ...hopperIds])
    .update({ deletedAt: new Date() });

  const res = await client(h.url).post('/identify', { token: operator.token, form: { attestation: 'true', file: file('lfw/Powell_2.png') } });
  t.is(res.status, 200, res.text);
  t.is(res.body.outcome, 'match');
  t.deepEqual(
    res.body.candidates.map((c: { userId: string; rank: number }) => [c.userId, c.rank]),
    [[powell.userId, 1]],
  );
  const row = await h.deps.db('searchLogs').where({ id: res.body.referenceId }).first();
  t.is(row.outcome, 'match');
  t.deepEqual(row.matchedUserIds, [powell.userId]);
  t.deepEqual(row.candidates, res.body.candidates);

  const alone = await client(h.url).post('/identify', { token: operator.token, form: { attestation: 'true', file: file('grace_hopper_b.jpg') } });
  t.is(alone.status, 200, alone.text);
  t.is(alone.body.outcome, 'no_match');
  t.deepEqual(alone.body.candidates, []);
  const aloneRow = await h.deps.db('searchLogs').where({ id: alone.body.referenceId }).first();
  t.is(aloneRow.outcome, 'no_match');
  t.deepEqual(aloneRow.matchedUserIds, []);
  t.deepEqual(aloneRow.candidates, []);
});
