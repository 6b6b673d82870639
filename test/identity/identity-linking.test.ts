/**
 * Identity linking end to end, through HTTP, on real photos with the real face and search workers: the
 * registry is the web server's own simulator under /api (REGISTRY_URL's default), reached over HTTP.
 *
 * Photos (test/fixtures/faces, provenance in PROVENANCE.md): LFW tiles of George W. Bush (1-3) and Colin
 * Powell (1-3), a fruit photo without a face, group photos. The registry holds one photo of a person;
 * the "selfie" is another photo of the same person.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createDeps, closeDeps, type AppDeps } from '../../processes/web/deps.js';
import { startWebProcess, type RunningWebProcess } from '../../processes/web.js';
import { removeCanonical } from '../../features/face/embeddings-repository.js';
import { createLogger } from '../../platform/logger.js';
import { freePort } from '../../scripts/lib/private-services.js';
import { useHarness, ROOT } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer, newOperator } from '../helpers/principals.js';

const FACES = path.join(ROOT, 'test/fixtures/faces');
const photo = (f: string) => readFileSync(path.join(FACES, f));
const IMG = {
  bush1: photo('lfw/Bush_1.png'),
  bush2: photo('lfw/Bush_2.png'),
  bush3: photo('lfw/Bush_3.png'),
  powell1: photo('lfw/Powell_1.png'),
  powell2: photo('lfw/Powell_2.png'),
  fruit: photo('no_face_fruits.jpg'),
  group: photo('group/sample1.jpg'),
};
const ANDROID_UA = 'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Mobile Safari/537.36';
const REGISTRY_TIMEOUT_MS = 1500;

/** A second web process of the same deployment (same database, Redis and workers), other settings. */
interface ExtraWeb {
  url: string;
  deps: AppDeps;
  web: RunningWebProcess;
}
const extras: ExtraWeb[] = [];
let flagWeb: ExtraWeb;
let faultWeb: ExtraWeb;

async function extraWeb(env: Record<string, string>): Promise<ExtraWeb> {
  const config = h.configFor({ PORT: String(await freePort()), ...env });
  const deps = createDeps(config, { logger: createLogger({ level: 'silent' }) });
  const web = await startWebProcess(deps, { port: config.http.port, poller: false });
  const e = { url: web.web.url, deps, web };
  extras.push(e);
  return e;
}

const h = useHarness(
  test,
  { face: true, search: 1, env: { REGISTRY_TIMEOUT_MS: String(REGISTRY_TIMEOUT_MS), CROSS_REGISTRY_MISMATCH_POLICY: 'hard-block' } },
  {
    ready: async () => {
      flagWeb = await extraWeb({ CROSS_REGISTRY_MISMATCH_POLICY: 'flag-and-continue' });
      const faultPort = await freePort();
      faultWeb = await extraWeb({ PORT: String(faultPort), REGISTRY_URL: `http://127.0.0.1:${faultPort}/api`, REGISTRY_SIM_FAULT: 'timeout' });
    },
    beforeStop: async () => {
      for (const e of extras) {
        await e.web.close();
        await closeDeps(e.deps);
      }
    },
  },
);

const api = (base = h.url) => client(base);

interface Person {
  nin?: string;
  bvn?: string;
}
let seq = 0;
async function enrol(image: Buffer, over: Record<string, string> = {}): Promise<Person> {
  const res = await api().post('/api/enroll', {
    form: {
      firstName: 'George',
      middleName: 'Walker',
      lastName: 'Bush',
      dateOfBirth: '1946-07-06',
      gender: 'male',
      phone: `+23480${String(++seq).padStart(8, '0')}`,
      ...over,
      photo: { data: image, filename: 'photo.png', type: 'image/png' },
    },
  });
  if (res.status !== 201) throw new Error(`enrol failed: ${res.status} ${res.text}`);
  return res.body.person;
}

const validate = (token: string, registry: 'nin' | 'bvn', number: string, opts: { base?: string; headers?: Record<string, string> } = {}) =>
  api(opts.base).post(`/identity/${registry}/validate`, { token, json: { [registry]: number }, headers: opts.headers });

const verifyFace = (token: string, registry: 'nin' | 'bvn', validationToken: string, image: Buffer | null, opts: { reuse?: boolean; base?: string } = {}) =>
  api(opts.base).post(`/identity/${registry}/verify-face`, {
    token,
    form: {
      validationToken,
      ...(opts.reuse ? { reuseCapture: 'true' } : {}),
      ...(image ? { file: { data: image, filename: 'selfie.png', type: 'image/png' } } : {}),
    },
  });

const link = (token: string, registry: 'nin' | 'bvn', linkToken: string, opts: { base?: string; ua?: string } = {}) =>
  api(opts.base).post(`/identity/${registry}/link`, { token, json: { linkToken }, headers: opts.ua ? { 'user-agent': opts.ua } : {} });

/** validate → verify-face → link with a selfie; returns the link answer. */
async function linkWith(
  t: import('ava').ExecutionContext,
  token: string,
  registry: 'nin' | 'bvn',
  number: string,
  selfie: Buffer | null,
  opts: { reuse?: boolean; base?: string; ua?: string } = {},
) {
  const v = await validate(token, registry, number, opts);
  t.is(v.status, 200, v.text);
  const f = await verifyFace(token, registry, v.body.validationToken, selfie, opts);
  t.is(f.status, 200, f.text);
  const l = await link(token, registry, f.body.linkToken, opts);
  t.is(l.status, 200, l.text);
  return l;
}

// Serial (ava runs serial tests first): the 1:N search at its end must see an index holding this user
// alone, not the identical embeddings other tests link concurrently.
test.serial('NIN then BVN with reuseCapture: validate, verify-face, link; single-use linkToken; the user is found by /identify at once', async (t) => {
  const person = await enrol(IMG.bush1);
  const user = await newConsumer(h);

  // validate: a validationToken and the masked name, nothing else (never the photo).
  const v = await validate(user.token, 'nin', person.nin!);
  t.is(v.status, 200, v.text);
  t.deepEqual(Object.keys(v.body).sort(), ['expiresIn', 'matchedName', 'validationToken']);
  t.is(v.body.matchedName, 'G***** W***** B***');
  t.is(v.body.expiresIn, 900);
  t.false(v.text.includes(IMG.bush1.subarray(0, 16).toString('base64')));

  // verify-face: Bush_2 against the registry's Bush_1.
  const f = await verifyFace(user.token, 'nin', v.body.validationToken, IMG.bush2);
  t.is(f.status, 200, f.text);
  t.is(f.body.outcome, 'match');
  t.is(typeof f.body.linkToken, 'string');
  t.is(f.body.expiresIn, 300);
  t.true(f.body.score >= h.config.face.matchThreshold);
  // The registry photo was dropped with the validation: the token cannot be used again.
  const again = await verifyFace(user.token, 'nin', v.body.validationToken, IMG.bush2);
  t.is(again.status, 404);
  t.is(again.body.error, 'not_found');

  // Another user cannot use the linkToken (and does not burn it for its owner).
  const intruder = await newConsumer(h);
  t.is((await link(intruder.token, 'nin', f.body.linkToken)).status, 404);
  // The BVN route does not accept a NIN linkToken either.
  t.is((await link(user.token, 'bvn', f.body.linkToken)).status, 404);

  // link: 10 concurrent uses of the linkToken, exactly one links.
  const answers = await Promise.all(Array.from({ length: 10 }, () => link(user.token, 'nin', f.body.linkToken, { ua: ANDROID_UA })));
  const ok = answers.filter((a) => a.status === 200);
  t.is(ok.length, 1, answers.map((a) => a.status).join(','));
  t.true(answers.filter((a) => a.status !== 200).every((a) => a.status === 404 && a.body.error === 'not_found'));
  t.is(ok[0]!.body.status, 'linked');
  t.is(ok[0]!.body.registry, 'nin');
  t.truthy(Date.parse(ok[0]!.body.linkedAt));
  // Replayed later: still 404.
  t.is((await link(user.token, 'nin', f.body.linkToken)).status, 404);

  // The first link filled the profile from the registry record; the link row carries the device hint.
  const row = await h.deps.db('users').where({ id: user.userId }).first();
  t.is(row.name, 'George Walker Bush');
  t.is(row.dateOfBirth, '1946-07-06');
  t.is(row.gender, 'male');
  const ninLink = await h.deps.db('ninLinks').where({ userId: user.userId }).first();
  t.is(ninLink.nin, person.nin);
  t.is(ninLink.deviceHint, 'Android phone');
  t.false(ninLink.crossRegistryFlagged);
  const canonical = await h.deps.db('canonicalEmbeddings').where({ userId: user.userId }).first();
  t.is(canonical.source, 'link_nin');
  const audit = await h.deps.db('auditEvents').where({ type: 'identity.linked', subjectId: user.userId }).first();
  t.is(audit.data.deviceHint, 'Android phone');
  t.is(audit.data.registry, 'nin');
  t.false(JSON.stringify(audit.data).includes(person.nin!));

  // BVN of the same person, reusing the NIN capture (no file), still compared with the BVN photo.
  const vb = await validate(user.token, 'bvn', person.bvn!);
  t.is(vb.status, 200, vb.text);
  const fb = await verifyFace(user.token, 'bvn', vb.body.validationToken, null, { reuse: true });
  t.is(fb.status, 200, fb.text);
  t.is(fb.body.outcome, 'match');
  const lb = await link(user.token, 'bvn', fb.body.linkToken, { ua: 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X)' });
  t.is(lb.status, 200, lb.text);
  t.is(lb.body.registry, 'bvn');
  t.is((await h.deps.db('bvnLinks').where({ userId: user.userId }).first()).deviceHint, 'iPhone');

  // Right after link answered, a 1:N search with another photo of the person finds the user.
  const operator = await newOperator(h);
  const found = await api().post('/identify', {
    token: operator.token,
    form: { attestation: 'true', file: { data: IMG.bush3, filename: 'probe.png', type: 'image/png' } },
  });
  t.is(found.status, 200, found.text);
  t.is(found.body.outcome, 'match');
  t.is(found.body.candidates[0]?.userId, user.userId, JSON.stringify(found.body.candidates));

  // A second NIN on the same account, or the same one again, is a conflict.
  t.is((await validate(user.token, 'nin', person.nin!)).status, 409);
});

test('a number linked by another account answers only alreadyLinked, linkedAt and the device hint', async (t) => {
  const person = await enrol(IMG.bush1);
  const owner = await newConsumer(h);
  await linkWith(t, owner.token, 'nin', person.nin!, IMG.bush2, { ua: ANDROID_UA });

  const other = await newConsumer(h);
  const res = await validate(other.token, 'nin', person.nin!);
  t.is(res.status, 200, res.text);
  t.deepEqual(Object.keys(res.body).sort(), ['alreadyLinked', 'deviceHint', 'linkedAt']);
  t.is(res.body.alreadyLinked, true);
  t.is(res.body.deviceHint, 'Android phone');
  const row = await h.deps.db('ninLinks').where({ nin: person.nin }).first();
  t.is(res.body.linkedAt, new Date(row.linkedAt).toISOString());
});

test("a deleted account's number is free again: another account can validate and link it", async (t) => {
  const person = await enrol(IMG.bush1, { issue: 'nin' });
  const first = await newConsumer(h);
  await linkWith(t, first.token, 'nin', person.nin!, IMG.bush2);
  // As DELETE /users/{id} does it: the embedding leaves the index, then the row is soft-deleted.
  await removeCanonical(h.deps.db, first.userId);
  await h.deps.db('users').where({ id: first.userId }).update({ deletedAt: new Date() });

  const second = await newConsumer(h);
  const v = await validate(second.token, 'nin', person.nin!);
  t.is(v.status, 200, v.text);
  t.false('alreadyLinked' in v.body);
  const f = await verifyFace(second.token, 'nin', v.body.validationToken, IMG.bush3);
  t.is(f.status, 200, f.text);
  t.is((await link(second.token, 'nin', f.body.linkToken)).status, 200);
  t.is((await h.deps.db('ninLinks').where({ nin: person.nin }).first()).userId, second.userId);
  const released = await h.deps.db('auditEvents').where({ type: 'identity.link_released', subjectId: first.userId }).first();
  t.is(released.actorId, second.userId);
});

test('impostor → 422 face_mismatch; no face → no_face; group photo → multiple_faces; each echoes outcome', async (t) => {
  const powell = await enrol(IMG.powell1, { firstName: 'Colin', middleName: 'Luther', lastName: 'Powell', dateOfBirth: '1937-04-05' });
  const user = await newConsumer(h);
  const v = await validate(user.token, 'nin', powell.nin!);
  t.is(v.body.matchedName, 'C**** L***** P*****');
  const cases: Array<[Buffer, string]> = [
    [IMG.bush2, 'face_mismatch'],
    [IMG.fruit, 'no_face'],
    [IMG.group, 'multiple_faces'],
  ];
  for (const [image, code] of cases) {
    const res = await verifyFace(user.token, 'nin', v.body.validationToken, image);
    t.is(res.status, 422, `${code}: ${res.text}`);
    t.is(res.body.error, code);
    t.is(res.body.outcome, code);
    t.is(typeof res.body.message, 'string');
  }
  // Failures do not consume the validation: the right person still gets through (attempt 4 of 5).
  const ok = await verifyFace(user.token, 'nin', v.body.validationToken, IMG.powell2);
  t.is(ok.status, 200, ok.text);
  const metrics = await api().get('/metrics');
  t.regex(metrics.text, /verification_outcomes_total\{endpoint="verify_face",outcome="face_mismatch"\} [1-9]/);
});

test('verify-face allows at most 5 attempts per validationToken, then 429 rate_limited with Retry-After', async (t) => {
  const person = await enrol(IMG.bush1);
  const user = await newConsumer(h);
  const v = await validate(user.token, 'nin', person.nin!);
  for (let i = 1; i <= 5; i++) {
    const res = await verifyFace(user.token, 'nin', v.body.validationToken, IMG.fruit);
    t.is(res.status, 422, `attempt ${i}`);
  }
  const sixth = await verifyFace(user.token, 'nin', v.body.validationToken, IMG.bush2);
  t.is(sixth.status, 429);
  t.is(sixth.body.error, 'rate_limited');
  // Every error body of verify-face echoes its code as outcome, not only the face outcomes.
  t.is(sixth.body.outcome, 'rate_limited');
  const retryAfter = Number(sixth.headers.get('retry-after'));
  t.true(retryAfter >= 1 && retryAfter <= 900, String(retryAfter));
  // A fresh validation starts a fresh count.
  const v2 = await validate(user.token, 'nin', person.nin!);
  t.is((await verifyFace(user.token, 'nin', v2.body.validationToken, IMG.bush2)).status, 200);
});

test('a new validation ends the previous one (one cached registry photo per consumer and registry), and validations are capped per hour', async (t) => {
  const person = await enrol(IMG.bush1);
  const user = await newConsumer(h);
  const first = await validate(user.token, 'nin', person.nin!);
  const second = await validate(user.token, 'nin', person.nin!);
  t.is(second.status, 200);
  const stale = await verifyFace(user.token, 'nin', first.body.validationToken, IMG.bush2);
  t.is(stale.status, 404, 'the replaced validation is gone, with its photo');
  t.is(stale.body.error, 'not_found');
  // Up to VALIDATIONS_PER_USER_PER_HOUR (10) in all, counting the two above and unknown numbers.
  for (let i = 3; i <= h.config.identity.validationsPerUserPerHour; i++) {
    t.not((await validate(user.token, 'nin', '19999999999')).status, 429, `validation ${i}`);
  }
  const over = await validate(user.token, 'nin', person.nin!);
  t.is(over.status, 429);
  t.is(over.body.error, 'rate_limited');
  t.true(Number(over.headers.get('retry-after')) >= 1);
  // The latest validation still works: the cap stops new ones, not the one in progress.
  t.is((await verifyFace(user.token, 'nin', second.body.validationToken, IMG.bush2)).status, 200);
});

test('verify-face refuses unknown or foreign validationTokens, a missing file, and reuseCapture without a recent NIN capture', async (t) => {
  const person = await enrol(IMG.bush1);
  const user = await newConsumer(h);
  const other = await newConsumer(h);
  const v = await validate(user.token, 'bvn', person.bvn!);

  const unknown = await verifyFace(user.token, 'bvn', 'vt_not-a-real-token', IMG.bush2);
  t.is(unknown.status, 404);
  t.is(unknown.body.outcome, 'not_found');
  t.is((await verifyFace(other.token, 'bvn', v.body.validationToken, IMG.bush2)).status, 404);
  t.is((await verifyFace(user.token, 'nin', v.body.validationToken, IMG.bush2)).status, 404);

  const noFile = await verifyFace(user.token, 'bvn', v.body.validationToken, null);
  t.is(noFile.status, 400);
  t.is(noFile.body.error, 'validation_failed');
  t.is(noFile.body.outcome, 'validation_failed');
  const both = await verifyFace(user.token, 'bvn', v.body.validationToken, IMG.bush2, { reuse: true });
  t.is(both.status, 400);
  const noCapture = await verifyFace(user.token, 'bvn', v.body.validationToken, null, { reuse: true });
  t.is(noCapture.status, 404);
  t.is(noCapture.body.error, 'not_found');
  const unauth = await api().post('/identity/bvn/verify-face', { form: { validationToken: v.body.validationToken } });
  t.is(unauth.status, 401);
});

test('validate: 400 for anything but 11 digits, 404 unknown number, 400 registry_mismatch against the other linked registry', async (t) => {
  const user = await newConsumer(h);
  for (const body of [{ nin: '1234567890' }, { nin: '1234567890a' }, { nin: 12345678901 }, { bvn: '12345678901' }, {}]) {
    const res = await api().post('/identity/nin/validate', { token: user.token, json: body });
    t.is(res.status, 400, JSON.stringify(body));
    t.is(res.body.error, 'validation_failed');
  }
  const missing = await validate(user.token, 'nin', '00000000000');
  t.is(missing.status, 404);
  t.is(missing.body.error, 'not_found');

  const person = await enrol(IMG.bush1, { issue: 'nin' });
  await linkWith(t, user.token, 'nin', person.nin!, IMG.bush2);
  const otherDob = await enrol(IMG.bush1, { issue: 'bvn', dateOfBirth: '1946-07-07' });
  const otherName = await enrol(IMG.bush1, { issue: 'bvn', firstName: 'Jeb' });
  const sameSwapped = await enrol(IMG.bush1, { issue: 'bvn', firstName: 'BUSH', middleName: '', lastName: 'george' });
  // The answer names no field (SPEC 14.2): a different date of birth and a different name answer alike.
  const answers: string[] = [];
  for (const p of [otherDob, otherName]) {
    const res = await validate(user.token, 'bvn', p.bvn!);
    t.is(res.status, 400, res.text);
    t.is(res.body.error, 'registry_mismatch');
    t.is(res.body.details, undefined);
    t.notRegex(res.body.message, /name|birth/i);
    answers.push(JSON.stringify({ ...res.body, requestId: undefined }));
  }
  t.is(answers[0], answers[1]);
  // Case, a missing middle name and first/last order do not make a mismatch.
  t.is((await validate(user.token, 'bvn', sameSwapped.bvn!)).status, 200);
});

test('cross-registry mismatch under hard-block: 422 cross_registry_mismatch, high-severity audit, no link', async (t) => {
  // The BVN record names the same person but holds Powell's photo: the Powell selfie matches the BVN
  // photo, and not the canonical embedding (Bush) that the NIN link stored.
  const nin = await enrol(IMG.bush1, { issue: 'nin' });
  const bvn = await enrol(IMG.powell1, { issue: 'bvn' });
  const user = await newConsumer(h);
  await linkWith(t, user.token, 'nin', nin.nin!, IMG.bush2);

  const v = await validate(user.token, 'bvn', bvn.bvn!);
  t.is(v.status, 200, v.text);
  const res = await verifyFace(user.token, 'bvn', v.body.validationToken, IMG.powell2);
  t.is(res.status, 422, res.text);
  t.is(res.body.error, 'cross_registry_mismatch');
  t.is(res.body.outcome, 'cross_registry_mismatch');
  t.false('linkToken' in res.body);

  const audit = await h.deps.db('auditEvents').where({ type: 'identity.cross_registry_mismatch', subjectId: user.userId }).first();
  t.is(audit.severity, 'high');
  t.is(audit.data.policy, 'hard-block');
  t.is(audit.data.action, 'blocked');
  t.is(await h.deps.db('bvnLinks').where({ userId: user.userId }).first(), undefined);

  // A genuine BVN photo of the same person passes the cross-registry check.
  const genuine = await enrol(IMG.bush3, { issue: 'bvn' });
  const l = await linkWith(t, user.token, 'bvn', genuine.bvn!, IMG.bush2);
  t.is(l.body.registry, 'bvn');
});

test('cross-registry mismatch under flag-and-continue: the link proceeds, flagged, with a high-severity audit', async (t) => {
  const nin = await enrol(IMG.bush1, { issue: 'nin' });
  const bvn = await enrol(IMG.powell1, { issue: 'bvn' });
  const user = await newConsumer(h);
  const base = flagWeb.url;
  await linkWith(t, user.token, 'nin', nin.nin!, IMG.bush2, { base });

  const l = await linkWith(t, user.token, 'bvn', bvn.bvn!, IMG.powell2, { base });
  t.is(l.body.status, 'linked');
  const row = await h.deps.db('bvnLinks').where({ userId: user.userId }).first();
  t.true(row.crossRegistryFlagged);
  const audit = await h.deps.db('auditEvents').where({ type: 'identity.cross_registry_mismatch', subjectId: user.userId }).first();
  t.is(audit.severity, 'high');
  t.is(audit.data.policy, 'flag-and-continue');
  t.is(audit.data.action, 'flagged');
  const linked = await h.deps.db('auditEvents').where({ type: 'identity.linked', subjectId: user.userId }).orderBy('id', 'desc').first();
  t.true(linked.data.crossRegistryFlagged);
  // The profile kept the first link's data; the canonical embedding now comes from the BVN link.
  t.is((await h.deps.db('canonicalEmbeddings').where({ userId: user.userId }).first()).source, 'link_bvn');
});

test('registry down: 502 registry_unavailable within REGISTRY_TIMEOUT_MS (header timeout, header error, env timeout)', async (t) => {
  const person = await enrol(IMG.bush1);
  const user = await newConsumer(h);
  for (const fault of ['timeout', 'error']) {
    const started = Date.now();
    const res = await validate(user.token, 'nin', person.nin!, { headers: { 'X-Registry-Fault': fault } });
    const took = Date.now() - started;
    t.is(res.status, 502, `${fault}: ${res.text}`);
    t.is(res.body.error, 'registry_unavailable');
    t.true(took < REGISTRY_TIMEOUT_MS + 1000, `${fault} took ${took} ms`);
    if (fault === 'timeout') t.true(took >= REGISTRY_TIMEOUT_MS - 50, `timeout answered after ${took} ms`);
  }
  // A web process whose registry (its own simulator) hangs by configuration.
  const started = Date.now();
  const res = await validate(user.token, 'nin', person.nin!, { base: faultWeb.url });
  t.is(res.status, 502, res.text);
  t.is(res.body.error, 'registry_unavailable');
  t.true(Date.now() - started < REGISTRY_TIMEOUT_MS + 1000);
  // The registry is fine again without the fault.
  t.is((await validate(user.token, 'nin', person.nin!)).status, 200);
});
