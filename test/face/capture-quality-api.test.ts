/**
 * Capture quality through the API, end to end (real workers, real photos): the advisory `quality`
 * on verify-face, /verify/self and /identify (never changing an outcome), SearchLog keeping the
 * score, the /verify/self refresh rule that keeps a poor capture from replacing a better canonical
 * embedding, and IDENTIFY_MATCH_THRESHOLD apart from MATCH_THRESHOLD.
 */
import test from 'ava';
import sharp from 'sharp';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { upsertCanonical } from '../../features/face/embeddings-repository.js';
import { hasFace } from '../../features/face/face-service.js';
import { decideCanonicalRefresh } from '../../features/face/canonical-refresh.js';
import { QUALITY_ISSUES } from '../../platform/face/quality.js';
import { ROOT, startHarness, type Harness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer, newOperator } from '../helpers/principals.js';

const photo = (rel: string) => readFileSync(path.join(ROOT, 'test', 'fixtures', 'faces', rel));
const png = (data: Buffer, name = 'capture.png') => ({ data, filename: name, type: 'image/png' });
const IDENTIFY_THRESHOLD = 0.7;

let h: Harness;
let operator: { operatorId: string; token: string };

/** Enrols through the change path with the capture's quality, as link does. */
async function enrol(userId: string, image: Buffer): Promise<number | null> {
  const a = await h.deps.face.analyseCapture(image, 'single');
  if (!hasFace(a)) throw new Error('no face');
  const e = await h.deps.face.embedCapture(a);
  await upsertCanonical(h.deps.db, userId, e.embedding, 'link_nin', e.engineVersion, undefined, a.quality?.score ?? null);
  return a.quality?.score ?? null;
}

/** grace_hopper_b darkened to a quarter: still the same face at high confidence, a poor capture. */
const darkHopper = () => sharp(photo('grace_hopper_b.jpg')).linear(0.25, 0).png().toBuffer();

test.before(async () => {
  h = await startHarness({ face: true, search: 1, env: { IDENTIFY_MATCH_THRESHOLD: String(IDENTIFY_THRESHOLD) } });
  operator = await newOperator(h);
});
test.after.always(async () => {
  await h?.stop();
});

test.serial('a poor capture that matches with high confidence does not replace a better canonical embedding', async (t) => {
  const gh = await newConsumer(h);
  const storedQuality = await enrol(gh.userId, photo('grace_hopper_a.jpg'));
  t.true(storedQuality !== null && storedQuality >= h.config.face.canonicalRefreshMinQuality, `stored capture quality ${storedQuality}`);
  const before = await h.deps.db('canonicalEmbeddings').where({ userId: gh.userId }).first();
  const changesBefore = await h.deps.db('embeddingChanges').where({ userId: gh.userId }).count({ n: '*' }).first();

  const res = await client(h.url).post('/verify/self', { token: gh.token, form: { image: png(await darkHopper()) } });
  t.is(res.status, 200, res.text);
  // The outcome is what it always was: a high-confidence match, with its proofToken.
  t.is(res.body.outcome, 'match');
  t.true(res.body.score >= h.config.face.highConfidenceThreshold, `score ${res.body.score}`);
  t.is(typeof res.body.proofToken, 'string');
  // The advisory quality says why the capture is poor; the refresh is declined, and says so.
  t.true(res.body.quality.issues.includes('too_dark'), JSON.stringify(res.body.quality));
  t.true(res.body.quality.score < storedQuality!);
  t.deepEqual(res.body.canonicalRefresh, { refreshed: false, reason: 'quality_below_floor_and_stored' });

  const after = await h.deps.db('canonicalEmbeddings').where({ userId: gh.userId }).first();
  t.deepEqual(after.embedding, before.embedding, 'the canonical embedding is unchanged');
  t.is(after.source, 'link_nin');
  t.is(after.qualityScore, storedQuality);
  const changesAfter = await h.deps.db('embeddingChanges').where({ userId: gh.userId }).count({ n: '*' }).first();
  t.is(Number(changesAfter!.n), Number(changesBefore!.n), 'nothing was sent to the search index');
  const audit = await h.deps.db('auditEvents').where({ type: 'canonical_embedding.refresh_declined', subjectId: gh.userId }).first();
  t.truthy(audit);
  t.is(audit.data.referenceId, res.body.referenceId);
  t.is(audit.data.qualityScore, res.body.quality.score);
  t.is(audit.data.storedQualityScore, storedQuality);
  const log = await h.deps.db('searchLogs').where({ id: res.body.referenceId }).first();
  t.is(log.qualityScore, res.body.quality.score, 'SearchLog keeps the quality score');

  // A good capture of the same person does refresh it, with its own quality stored.
  const good = await client(h.url).post('/verify/self', { token: gh.token, form: { image: png(photo('grace_hopper_b.jpg'), 'b.jpg') } });
  t.is(good.body.outcome, 'match');
  t.deepEqual(good.body.quality.issues, []);
  t.deepEqual(good.body.canonicalRefresh, { refreshed: true, reason: 'quality_at_or_above_floor' });
  const refreshed = await h.deps.db('canonicalEmbeddings').where({ userId: gh.userId }).first();
  t.is(refreshed.source, 'verify_self');
  t.is(refreshed.qualityScore, good.body.quality.score);
  t.notDeepEqual(refreshed.embedding, before.embedding);
  t.truthy(await h.deps.db('auditEvents').where({ type: 'canonical_embedding.refreshed', subjectId: gh.userId }).first());
});

test.serial('/verify/self: without a face, the quality of the whole photo (no issue for a good one); outcomes are unchanged', async (t) => {
  const bush = await newConsumer(h);
  await enrol(bush.userId, photo('lfw/Bush_1.png'));
  const fruit = await client(h.url).post('/verify/self', { token: bush.token, form: { image: png(photo('no_face_fruits.jpg'), 'f.jpg') } });
  t.is(fruit.status, 200);
  t.is(fruit.body.outcome, 'no_face');
  t.deepEqual(fruit.body.quality.issues, [], 'a well exposed, sharp photo of fruit: nothing to advise');
  t.true(fruit.body.quality.score >= 50);
  t.is(fruit.body.canonicalRefresh, undefined);
  // A genuine match below high confidence (Bush 1~3 0.663): matched, nothing to decide about refresh.
  const mid = await client(h.url).post('/verify/self', { token: bush.token, form: { image: png(photo('lfw/Bush_3.png')) } });
  t.is(mid.body.outcome, 'match');
  t.deepEqual(mid.body.canonicalRefresh, { refreshed: false, reason: 'below_high_confidence' });
  t.true(mid.body.quality.issues.every((i: string) => (QUALITY_ISSUES as readonly string[]).includes(i)));
});

test.serial('/identify answers the quality and the 1:N threshold that applied; SearchLog keeps the score', async (t) => {
  const bush = await newConsumer(h);
  await enrol(bush.userId, photo('lfw/Bush_1.png'));
  const api = client(h.url);
  // Bush 1~2 scores 0.746: above the 1:N threshold of this deployment (0.7).
  const hit = await api.post('/identify', { token: operator.token, form: { attestation: 'true', file: png(photo('lfw/Bush_2.png')) } });
  t.is(hit.status, 200, hit.text);
  t.is(hit.body.outcome, 'match');
  t.deepEqual(hit.body.threshold, { setting: 'IDENTIFY_MATCH_THRESHOLD', value: IDENTIFY_THRESHOLD });
  t.true(hit.body.candidates.every((c: { score: number }) => c.score >= IDENTIFY_THRESHOLD));
  t.is(typeof hit.body.quality.score, 'number');
  t.deepEqual(hit.body.quality.issues, []);
  const row = await h.deps.db('searchLogs').where({ id: hit.body.referenceId }).first();
  t.is(row.qualityScore, hit.body.quality.score);

  // Bush 1~3 scores 0.663: a 1:1 match at MATCH_THRESHOLD (0.45), but not a 1:N candidate at 0.7.
  const below = await api.post('/identify', { token: operator.token, form: { attestation: 'true', file: png(photo('lfw/Bush_3.png')) } });
  t.is(below.body.outcome, 'no_match');
  t.false(below.body.candidates.some((c: { userId: string }) => c.userId === bush.userId));
  const self = await api.post('/verify/self', { token: bush.token, form: { image: png(photo('lfw/Bush_3.png')) } });
  t.is(self.body.outcome, 'match', '1:1 still uses MATCH_THRESHOLD');

  // No face: the whole photo's quality (nothing wrong with it), row without a (face) score.
  const none = await api.post('/identify', { token: operator.token, form: { attestation: 'true', file: png(photo('no_face_fruits.jpg'), 'f.jpg') } });
  t.is(none.body.outcome, 'no_face');
  t.deepEqual(none.body.quality.issues, []);
  t.is((await h.deps.db('searchLogs').where({ id: none.body.referenceId }).first()).qualityScore, null);
});

test.serial('verify-face: quality on the 200 match and on a 422 face outcome; link stores it with the canonical embedding', async (t) => {
  const api = client(h.url);
  const enrolled = await api.post('/api/enroll', {
    form: { firstName: 'George', lastName: 'Bush', dateOfBirth: '1946-07-06', gender: 'male', photo: png(photo('lfw/Bush_1.png')) },
  });
  t.is(enrolled.status, 201, enrolled.text);
  const user = await newConsumer(h);
  const v = await api.post('/identity/nin/validate', { token: user.token, json: { nin: enrolled.body.person.nin } });
  t.is(v.status, 200, v.text);
  const verify = (image: Buffer) =>
    api.post('/identity/nin/verify-face', { token: user.token, form: { validationToken: v.body.validationToken, file: png(image) } });

  // An impostor, darkened: the 422 outcome is unchanged, and it says the capture was dark too.
  const dark = await sharp(photo('lfw/Powell_1.png')).linear(0.25, 0).png().toBuffer();
  const mismatch = await verify(dark);
  t.is(mismatch.status, 422, mismatch.text);
  t.is(mismatch.body.error, 'face_mismatch');
  t.is(mismatch.body.outcome, 'face_mismatch');
  t.true(mismatch.body.quality.issues.includes('too_dark'), JSON.stringify(mismatch.body));
  // No face: the same 422 as before, with the whole photo's quality (nothing wrong with it).
  const none = await verify(photo('no_face_fruits.jpg'));
  t.is(none.status, 422);
  t.is(none.body.error, 'no_face');
  t.deepEqual(none.body.quality.issues, []);
  // A real face made too dark to be found: the 422 says why.
  const black = await verify(await sharp(photo('lfw/Bush_2.png')).linear(0.08, 0).png().toBuffer());
  t.is(black.status, 422);
  t.is(black.body.error, 'no_face');
  t.deepEqual(black.body.quality.issues, ['too_dark'], JSON.stringify(black.body));

  const f = await verify(photo('lfw/Bush_2.png'));
  t.is(f.status, 200, f.text);
  t.is(f.body.outcome, 'match');
  t.deepEqual(f.body.quality.issues, []);
  const linked = await api.post('/identity/nin/link', { token: user.token, json: { linkToken: f.body.linkToken } });
  t.is(linked.status, 200, linked.text);
  const canonical = await h.deps.db('canonicalEmbeddings').where({ userId: user.userId }).first();
  t.is(canonical.qualityScore, f.body.quality.score);
});

/**
 * Real photos degraded until the detector finds no face (the levels of scripts/quality-degradations.ts
 * beyond which the face is lost): the answer is still `no_face`, and its quality says what to change.
 */
test.serial('no_face on a photo too dark, too bright or too blurred for a face to be found says which', async (t) => {
  const api = client(h.url);
  const bush = await newConsumer(h);
  await enrol(bush.userId, photo('lfw/Bush_1.png'));
  const cases: Array<[string, Buffer, string]> = [
    ['darkened to 8%', await sharp(photo('lfw/Bush_1.png')).linear(0.08, 0).png().toBuffer(), 'too_dark'],
    ['over-exposed x5', await sharp(photo('lfw/Bush_1.png')).linear(5, 0).png().toBuffer(), 'too_bright'],
    ['blurred (sigma 8 px)', await sharp(photo('lfw/Bush_1.png')).blur(8).png().toBuffer(), 'blurred'],
    ['blurred (sigma 8 px)', await sharp(photo('lfw/Powell_1.png')).blur(8).png().toBuffer(), 'blurred'],
  ];
  for (const [what, image, issue] of cases) {
    const self = await api.post('/verify/self', { token: bush.token, form: { image: png(image) } });
    t.is(self.status, 200, self.text);
    t.is(self.body.outcome, 'no_face', what);
    t.deepEqual(self.body.quality.issues, [issue], `${what}: ${JSON.stringify(self.body.quality)}`);
    t.true(self.body.quality.score < 50, what);
    const identified = await api.post('/identify', { token: operator.token, form: { attestation: 'true', file: png(image) } });
    t.is(identified.body.outcome, 'no_face', what);
    t.deepEqual(identified.body.quality, self.body.quality, what);
    t.is((await h.deps.db('searchLogs').where({ id: identified.body.referenceId }).first()).qualityScore, null, "the stored score is a face's");
  }
});

test.serial('the OpenAPI document lists the quality issue codes on the three face routes', async (t) => {
  const doc = (await client(h.url).get('/openapi.json')).body;
  const text = JSON.stringify([
    doc.paths['/identify'].post.responses['200'],
    doc.paths['/verify/self'].post.responses['200'],
    doc.paths['/identity/nin/verify-face'].post.responses['200'],
  ]);
  for (const code of QUALITY_ISSUES) t.true(text.includes(`"const":"${code}"`), code);
  t.true(text.includes('IDENTIFY_MATCH_THRESHOLD'));
});

test('the refresh rule: floor, stored quality, unknowns', (t) => {
  const base = { score: 0.9, highConfidenceThreshold: 0.7, floor: 50 };
  t.deepEqual(decideCanonicalRefresh({ ...base, score: 0.6, newQuality: 90, storedQuality: 10 }), { refreshed: false, reason: 'below_high_confidence' });
  t.deepEqual(decideCanonicalRefresh({ ...base, newQuality: 50, storedQuality: 95 }), { refreshed: true, reason: 'quality_at_or_above_floor' });
  t.deepEqual(decideCanonicalRefresh({ ...base, newQuality: 30, storedQuality: 30 }), { refreshed: true, reason: 'quality_not_worse_than_stored' });
  t.deepEqual(decideCanonicalRefresh({ ...base, newQuality: 29, storedQuality: 30 }), { refreshed: false, reason: 'quality_below_floor_and_stored' });
  t.deepEqual(decideCanonicalRefresh({ ...base, newQuality: 40, storedQuality: null }), { refreshed: false, reason: 'quality_below_floor' });
  t.deepEqual(decideCanonicalRefresh({ ...base, newQuality: null, storedQuality: 80 }), { refreshed: true, reason: 'quality_not_measured' });
});
