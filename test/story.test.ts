/**
 * The README's "Try it" story as one end-to-end run, through HTTP only, with the real face and search
 * workers on real photos: a consumer signs in with the real OTP flow (the code read from the SMS outbox),
 * links a NIN and then a BVN (reuseCapture) of a person enrolled in the registry simulator, re-proves
 * themself with /verify/self and spends the proofToken on a phone change; the first administrator
 * (ADMIN_IDENTIFIER/ADMIN_PASSWORD, created by the same start-up step as `npm start`'s web process)
 * creates an operator, who signs in, sets a password and identifies the consumer, then escalates; the
 * consumer finds that identification in their history and disputes it; the administrator lists it.
 *
 * A second consumer (Colin Powell) is linked too, so that the 1:N search has someone to leave out and
 * someone else to refuse a dispute to. Serial steps share state; each step checks the previous one ran.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ensureFirstAdministrator } from '../features/staff/service.js';
import { ROOT, useHarness } from './helpers/harness.js';
import { client, type RequestOptions } from './helpers/http.js';

const ADMIN = { identifier: 'admin', password: 'admin-pass-123' };
const face = (rel: string) => ({
  data: readFileSync(path.join(ROOT, 'test', 'fixtures', 'faces', rel)),
  filename: path.basename(rel),
  type: rel.endsWith('.png') ? 'image/png' : 'image/jpeg',
});

const api = () => client(h.url);
const bearer = (token: string) => ({ token });

interface Consumer {
  phone: string;
  userId: string;
  token: string;
}
interface Person {
  nin: string;
  bvn: string;
}
const s: {
  bushPerson?: Person;
  powellPerson?: Person;
  bush?: Consumer;
  powell?: Consumer;
  adminToken?: string;
  operatorToken?: string;
  referenceId?: string;
  disputeId?: string;
} = {};

const h = useHarness(
  test,
  { face: true, search: 1, env: { ADMIN_IDENTIFIER: ADMIN.identifier, ADMIN_PASSWORD: ADMIN.password } },
  {
    ready: async () => {
      // The harness starts the web process without processes/web.ts's start-up step: run it as that file does.
      const first = await ensureFirstAdministrator(h.deps);
      if (!first.created) throw new Error(`first administrator not created: ${first.reason}`);
    },
  },
);

/** The newest code the SMS outbox holds for this phone. */
function codeFor(phone: string): string {
  const lines = readFileSync(h.outboxFile, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { to: string; code: string });
  const mine = lines.filter((l) => l.to === phone);
  if (!mine.length) throw new Error(`no SMS to ${phone} in the outbox`);
  return mine[mine.length - 1]!.code;
}

/** The real OTP flow; `e164` is the normalised form the SMS goes to. */
async function signIn(t: import('ava').ExecutionContext, phone: string, e164 = phone): Promise<Consumer> {
  const req = await api().post('/auth/otp/request', { json: { phone } });
  t.is(req.status, 200, req.text);
  t.deepEqual(req.body, { status: 'sent' });
  const code = codeFor(e164);
  t.regex(code, /^[0-9]{6}$/);
  const res = await api().post('/auth/otp/verify', { json: { phone, code } });
  t.is(res.status, 200, res.text);
  t.is(res.body.tokenType, 'Bearer');
  t.is(typeof res.body.accessToken, 'string');
  t.is(typeof res.body.refreshToken, 'string');
  return { phone: e164, userId: res.body.userId, token: res.body.accessToken };
}

async function enrol(t: import('ava').ExecutionContext, person: Record<string, string>, photo: string): Promise<Person> {
  const res = await api().post('/api/enroll', { form: { ...person, issue: 'both', photo: face(photo) } });
  t.is(res.status, 201, res.text);
  t.regex(res.body.person.nin, /^[0-9]{11}$/);
  t.regex(res.body.person.bvn, /^[0-9]{11}$/);
  return { nin: res.body.person.nin, bvn: res.body.person.bvn };
}

/** validate → verify-face (a selfie, or reuseCapture) → link. */
async function linkNumber(
  t: import('ava').ExecutionContext,
  who: Consumer,
  registry: 'nin' | 'bvn',
  number: string,
  selfie: string | null,
  matchedName: string,
) {
  const v = await api().post(`/identity/${registry}/validate`, { ...bearer(who.token), json: { [registry]: number } });
  t.is(v.status, 200, v.text);
  t.deepEqual(Object.keys(v.body).sort(), ['expiresIn', 'matchedName', 'validationToken']);
  t.is(v.body.matchedName, matchedName);

  const form: NonNullable<RequestOptions['form']> = selfie
    ? { validationToken: v.body.validationToken, file: face(selfie) }
    : { validationToken: v.body.validationToken, reuseCapture: 'true' };
  const f = await api().post(`/identity/${registry}/verify-face`, { ...bearer(who.token), form });
  t.is(f.status, 200, f.text);
  t.is(f.body.outcome, 'match');
  t.true(f.body.score >= h.config.face.matchThreshold);
  t.is(f.body.expiresIn, h.config.identity.linkTokenTtlSeconds);

  const l = await api().post(`/identity/${registry}/link`, { ...bearer(who.token), json: { linkToken: f.body.linkToken } });
  t.is(l.status, 200, l.text);
  t.is(l.body.status, 'linked');
  t.is(l.body.registry, registry);
  t.truthy(Date.parse(l.body.linkedAt));
}

test.serial('the registry simulator enrols the people of the story', async (t) => {
  s.bushPerson = await enrol(t, { firstName: 'George', middleName: 'Walker', lastName: 'Bush', dateOfBirth: '1946-07-06', gender: 'male' }, 'lfw/Bush_1.png');
  s.powellPerson = await enrol(
    t,
    { firstName: 'Colin', middleName: 'Luther', lastName: 'Powell', dateOfBirth: '1937-04-05', gender: 'male' },
    'lfw/Powell_1.png',
  );
  const found = await api().get('/api/search?name=George+Walker+Bush');
  t.is(found.status, 200);
  t.is(found.body.items[0]?.nin, s.bushPerson.nin);
});

test.serial('a consumer signs in with a one-time code and links NIN, then BVN reusing the capture', async (t) => {
  if (!s.bushPerson || !s.powellPerson) return t.fail('the enrolment step did not run');
  s.bush = await signIn(t, '+2348031234567');
  await linkNumber(t, s.bush, 'nin', s.bushPerson.nin, 'lfw/Bush_2.png', 'G***** W***** B***');
  await linkNumber(t, s.bush, 'bvn', s.bushPerson.bvn, null, 'G***** W***** B***');

  const me = await api().get(`/users/${s.bush.userId}`, bearer(s.bush.token));
  t.is(me.status, 200, me.text);
  t.like(me.body, {
    id: s.bush.userId,
    phone: '+2348031234567',
    name: 'George Walker Bush',
    dateOfBirth: '1946-07-06',
    gender: 'male',
    ninLinked: true,
    bvnLinked: true,
  });

  // A second linked consumer (local phone form, normalised), so that the 1:N search has a choice.
  s.powell = await signIn(t, '08039876543', '+2348039876543');
  await linkNumber(t, s.powell, 'nin', s.powellPerson.nin, 'lfw/Powell_2.png', 'C**** L***** P*****');
});

test.serial('verify/self answers a single-use proofToken that changes the phone once', async (t) => {
  const bush = s.bush;
  if (!bush) return t.fail('the linking step did not run');
  const self = await api().post('/verify/self', { ...bearer(bush.token), form: { image: face('lfw/Bush_3.png') } });
  t.is(self.status, 200, self.text);
  t.is(self.body.outcome, 'match');
  t.true(self.body.score >= h.config.face.matchThreshold);
  t.is(typeof self.body.proofToken, 'string');
  t.is(self.body.expiresIn, h.config.identity.proofTokenTtlSeconds);

  const change = { proofToken: self.body.proofToken, phone: '+2348037654321' };
  const patched = await api().patch(`/users/${bush.userId}`, { ...bearer(bush.token), json: change });
  t.is(patched.status, 200, patched.text);
  t.is(patched.body.status, 'applied');
  t.is(patched.body.user.phone, '+2348037654321');
  const replay = await api().patch(`/users/${bush.userId}`, { ...bearer(bush.token), json: change });
  t.is(replay.status, 403);
  t.is(replay.body.error, 'proof_token_invalid');

  // The new phone is the account's sign-in identity now.
  const again = await signIn(t, '+2348037654321');
  t.is(again.userId, bush.userId);
  t.is((await api().get(`/users/${bush.userId}`, bearer(bush.token))).body.phone, '+2348037654321');
});

test.serial('the first administrator creates an operator, who must set a password before identifying', async (t) => {
  const admin = await api().post('/auth/operator/login', { json: ADMIN });
  t.is(admin.status, 200, admin.text);
  t.false(admin.body.mustResetPassword);
  s.adminToken = admin.body.accessToken;

  const created = await api().post('/operators', { ...bearer(s.adminToken!), json: { identifier: 'ada', displayName: 'Ada Okafor' } });
  t.is(created.status, 201, created.text);
  t.like(created.body.operator, { identifier: 'ada', role: 'operator', status: 'active', mustResetPassword: true });
  t.false('passwordHash' in created.body.operator);
  const temporary = created.body.temporaryPassword as string;
  t.is(typeof temporary, 'string');

  const first = await api().post('/auth/operator/login', { json: { identifier: 'ada', password: temporary } });
  t.is(first.status, 200, first.text);
  t.true(first.body.mustResetPassword);
  t.is(first.body.operatorId, created.body.operator.id);
  const token = first.body.accessToken as string;

  const early = await api().post('/identify', { ...bearer(token), form: { attestation: 'true', file: face('lfw/Bush_3.png') } });
  t.is(early.status, 403);
  t.is(early.body.error, 'password_reset_required');

  const set = await api().post('/auth/operator/set-password', { ...bearer(token), json: { currentPassword: temporary, newPassword: 'ada-pass-456' } });
  t.is(set.status, 200, set.text);
  t.deepEqual(set.body, { status: 'password_set' });
  t.is((await api().post('/auth/operator/login', { json: { identifier: 'ada', password: temporary } })).status, 401);
  const later = await api().post('/auth/operator/login', { json: { identifier: 'ada', password: 'ada-pass-456' } });
  t.is(later.status, 200);
  t.false(later.body.mustResetPassword);
  s.operatorToken = token; // the session that set the password carries on, as in the README
});

test.serial('identify finds the linked consumer, escalate, history, dispute, and the administrator reads it', async (t) => {
  const { bush, powell, adminToken, operatorToken } = s;
  if (!bush || !powell || !adminToken || !operatorToken) return t.fail('an earlier step did not run');

  // 1:N identification with a photo of Bush the service has never seen.
  const found = await api().post('/identify', { ...bearer(operatorToken), form: { attestation: 'true', file: face('lfw/Bush_3.png') } });
  t.is(found.status, 200, found.text);
  t.is(found.body.outcome, 'match');
  t.is(found.body.candidates[0]?.userId, bush.userId, JSON.stringify(found.body.candidates));
  t.is(found.body.candidates[0]?.rank, 1);
  t.false(found.body.candidates.some((c: { userId: string }) => c.userId === powell.userId));
  t.deepEqual(Object.keys(found.body.latencyMs).sort(), ['embed', 'liveness', 'search', 'total']);
  s.referenceId = found.body.referenceId;

  const escalated = await api().post(`/identify/${s.referenceId}/escalate`, bearer(operatorToken));
  t.is(escalated.status, 200, escalated.text);
  t.is(escalated.body.referenceId, s.referenceId);
  t.truthy(Date.parse(escalated.body.escalatedAt));

  // The consumer's history: the identification that matched them, then their own verify/self.
  const history = await api().get(`/users/${bush.userId}/history`, bearer(bush.token));
  t.is(history.status, 200, history.text);
  t.like(history.body, { page: 1, pageSize: 20, total: 2 });
  t.like(history.body.items[0], { referenceId: s.referenceId, kind: 'identify', outcome: 'match', disputed: false });
  t.like(history.body.items[1], { kind: 'verify_self', outcome: 'match', disputed: false });

  // Powell was not matched by that identification: not his to dispute.
  const foreign = await api().post('/disputes', { ...bearer(powell.token), json: { referenceId: s.referenceId } });
  t.is(foreign.status, 403);
  t.is(foreign.body.error, 'forbidden');

  const disputed = await api().post('/disputes', { ...bearer(bush.token), json: { referenceId: s.referenceId, reason: 'I was not there that day' } });
  t.is(disputed.status, 201, disputed.text);
  t.like(disputed.body.dispute, { referenceId: s.referenceId, kind: 'identify', userId: bush.userId, reason: 'I was not there that day', status: 'open' });
  s.disputeId = disputed.body.dispute.id;
  t.like((await api().get(`/users/${bush.userId}/history`, bearer(bush.token))).body.items[0], { referenceId: s.referenceId, disputed: true });

  // The administrator's list; an operator's token is not enough.
  const list = await api().get('/disputes?status=open', bearer(adminToken));
  t.is(list.status, 200, list.text);
  t.like(list.body, { page: 1, pageSize: 20, total: 1 });
  t.like(list.body.items[0], { id: s.disputeId, referenceId: s.referenceId, userId: bush.userId, status: 'open', reason: 'I was not there that day' });
  const asOperator = await api().get('/disputes', bearer(operatorToken));
  t.is(asOperator.status, 403);
  t.is(asOperator.body.error, 'forbidden');
});

test.serial('the consumer deletes the account with a fresh proofToken: identify no longer finds them, GET and verify/self answer 404', async (t) => {
  const { bush, operatorToken } = s;
  if (!bush || !operatorToken) return t.fail('an earlier step did not run');
  const identify = () => api().post('/identify', { ...bearer(operatorToken), form: { attestation: 'true', file: face('lfw/Bush_2.png') } });
  t.true(
    (await identify()).body.candidates.some((c: { userId: string }) => c.userId === bush.userId),
    'found before the deletion',
  );

  const proof = await api().post('/verify/self', { ...bearer(bush.token), form: { image: face('lfw/Bush_2.png') } });
  t.is(proof.body.outcome, 'match', proof.text);
  const deleted = await api().delete(`/users/${bush.userId}`, { ...bearer(bush.token), json: { proofToken: proof.body.proofToken } });
  t.is(deleted.status, 200, deleted.text);
  t.deepEqual(deleted.body, { status: 'deleted' });

  // Right after the answer: no identification returns the user any more, on any search worker.
  const after = await identify();
  t.is(after.status, 200);
  t.false(
    after.body.candidates.some((c: { userId: string }) => c.userId === bush.userId),
    JSON.stringify(after.body.candidates),
  );
  // The still-valid access token now meets 404 on the consumer's routes.
  const gone = await api().get(`/users/${bush.userId}`, bearer(bush.token));
  t.is(gone.status, 404);
  t.is(gone.body.error, 'not_found');
  const self = await api().post('/verify/self', { ...bearer(bush.token), form: { image: face('lfw/Bush_2.png') } });
  t.is(self.status, 404);
  t.is(self.body.error, 'not_found');
});
