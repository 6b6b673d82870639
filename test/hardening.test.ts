/**
 * SPEC 12.3 through HTTP: the headers of every answer, a phone change (SMS notices to both numbers,
 * the other sessions ended), the proofToken bound to its session, and the anonymous /health.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import { issueProofToken } from '../features/verification/proof-tokens.js';
import { useHarness } from './helpers/harness.js';
import { client } from './helpers/http.js';
import { newConsumer, newOperator } from './helpers/principals.js';

const h = useHarness(test);
const api = () => client(h.url);

let phoneCounter = 0;
const freshPhone = () => `+234809${String(Date.now() % 1e5).padStart(5, '0')}${String(++phoneCounter % 100).padStart(2, '0')}`;

/** A second session of the same consumer (another device). */
async function secondSession(userId: string): Promise<{ token: string; sessionId: string }> {
  const [session] = await h.deps.db('sessions').insert({ subjectType: 'consumer', subjectId: userId }).returning('id');
  const { token } = await h.deps.tokens.signAccess({ sub: userId, aud: 'consumer', sid: session.id });
  return { token, sessionId: session.id };
}

const outbox = (): { to: string; code?: string; kind?: string; message?: string }[] => {
  try {
    return readFileSync(h.outboxFile, 'utf8')
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
  } catch {
    return [];
  }
};

test('every answer carries nosniff; answers with personal data are no-store', async (t) => {
  const me = await newConsumer(h);
  const operator = await newOperator(h);
  const answers = await Promise.all([
    api().get('/health'),
    api().get('/models'),
    api().get('/openapi.json'),
    api().get('/no/such/route'),
    api().get(`/users/${me.userId}`),
    api().get(`/users/${me.userId}`, { token: me.token }),
    api().get(`/users/${me.userId}/history`, { token: me.token }),
    api().get(`/users/${me.userId}/preferences`, { token: me.token }),
    api().post('/identify', { token: operator.token, form: { attestation: 'false' } }),
    api().get('/identify/mine', { token: operator.token }),
    api().get('/console/'),
  ]);
  for (const res of answers) t.is(res.headers.get('x-content-type-options'), 'nosniff', `${res.status} ${res.text.slice(0, 60)}`);
  for (const res of answers.slice(4, 10)) t.is(res.headers.get('cache-control'), 'no-store', res.text.slice(0, 60));
});

test('a phone change sends an SMS notice to the old and the new number and ends every other session', async (t) => {
  const oldPhone = freshPhone();
  const me = await newConsumer(h, { phone: oldPhone });
  const other = await secondSession(me.userId);
  const third = await secondSession(me.userId);
  const newPhone = freshPhone();
  const { proofToken } = await issueProofToken(h.deps, me.userId, me.sessionId);
  const res = await api().patch(`/users/${me.userId}`, { token: me.token, json: { proofToken, phone: newPhone } });
  t.is(res.status, 200, res.text);
  t.is(res.body.status, 'applied');
  t.is(res.body.user.phone, newPhone);

  const notices = outbox().filter((l) => l.kind === 'notice' && (l.to === oldPhone || l.to === newPhone));
  t.deepEqual(notices.map((n) => n.to).sort(), [newPhone, oldPhone].sort());
  for (const n of notices) {
    t.is(n.code, undefined);
    t.true(typeof n.message === 'string' && n.message.length > 0);
    t.false(n.message!.includes(n.to === oldPhone ? newPhone : oldPhone), 'the other number is masked');
  }
  // The other sessions are over; this one goes on.
  t.is((await api().get(`/users/${me.userId}`, { token: other.token })).status, 401);
  t.is((await api().get(`/users/${me.userId}`, { token: third.token })).status, 401);
  t.is((await api().get(`/users/${me.userId}`, { token: me.token })).status, 200);
  const audit = await h.deps.db('auditEvents').where({ type: 'profile.changed', subjectId: me.userId }).first();
  t.is(audit.data.otherSessionsRevoked, 2);
});

test('a bankAccount change alone sends no notice and ends no session', async (t) => {
  const phone = freshPhone();
  const me = await newConsumer(h, { phone });
  const other = await secondSession(me.userId);
  const { proofToken } = await issueProofToken(h.deps, me.userId, me.sessionId);
  const res = await api().patch(`/users/${me.userId}`, { token: me.token, json: { proofToken, bankAccount: '0123456789' } });
  t.is(res.status, 200, res.text);
  t.is(outbox().filter((l) => l.to === phone).length, 0);
  t.is((await api().get(`/users/${me.userId}`, { token: other.token })).status, 200);
});

test('a proofToken works only in the session that ran /verify/self: from another session 403 proof_token_invalid, not burnt', async (t) => {
  const me = await newConsumer(h);
  const other = await secondSession(me.userId);
  const { proofToken } = await issueProofToken(h.deps, me.userId, me.sessionId);
  const stolen = await api().patch(`/users/${me.userId}`, { token: other.token, json: { proofToken, bankAccount: '1111111111' } });
  t.is(stolen.status, 403);
  t.is(stolen.body.error, 'proof_token_invalid');
  const del = await api().delete(`/users/${me.userId}`, { token: other.token, json: { proofToken } });
  t.is(del.status, 403);
  t.is(del.body.error, 'proof_token_invalid');
  // Still good in its own session.
  const own = await api().patch(`/users/${me.userId}`, { token: me.token, json: { proofToken, bankAccount: '1111111111' } });
  t.is(own.status, 200, own.text);
});

test('anonymous /health: status and up only, from the last check; an administrator gets a fresh, detailed one', async (t) => {
  const anonymous = await api().get('/health');
  t.is(anonymous.status, 200);
  t.deepEqual(Object.keys(anonymous.body).sort(), ['dependencies', 'status']);
  for (const [name, d] of Object.entries(anonymous.body.dependencies as Record<string, object>)) t.deepEqual(Object.keys(d), ['up'], name);
  t.false(anonymous.body.dependencies.face_engine.up);

  // A face worker comes up: the anonymous answer is the last check's (at most 15 s old), the administrator's is live.
  const checkedAt = Date.now();
  await h.startFaceWorker();
  const cached = await api().get('/health');
  if (Date.now() - checkedAt < 14_000) t.false(cached.body.dependencies.face_engine.up, 'served from the last check, not a new one');
  else t.log('the face worker took too long to start to see the cached answer');
  const admin = await newOperator(h, { role: 'administrator' });
  const live = await api().get('/health', { token: admin.token });
  t.true(live.body.dependencies.face_engine.up);
  t.is(typeof live.body.dependencies.db.latencyMs, 'number');
  t.truthy(live.body.dependencies.face_engine.detail);
  // A non-administrator token, or a bad one, gets the anonymous view.
  const operator = await newOperator(h);
  for (const token of [operator.token, 'not-a-token']) {
    const res = await api().get('/health', { token });
    t.is(res.status, 200);
    t.deepEqual(Object.keys(res.body.dependencies.db), ['up']);
  }
});
