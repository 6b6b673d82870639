/**
 * Security events (SPEC 13.3), through HTTP: every sign-in, consumer and staff, success
 * (`auth.signed_in`) and failure (`auth.sign_in_failed`), MFA changes, the export (`user.exported`)
 * and phone changes are AuditEvents carrying the client's address and user agent, and GET
 * /audit-events returns both. The access log line names the caller's type, id and session, never a
 * phone or a name.
 */
import test from 'ava';
import { codeAt } from '../features/sign-in/totp.js';
import { issueProofToken } from '../features/verification/proof-tokens.js';
import { useHarness } from './helpers/harness.js';
import { client } from './helpers/http.js';
import { newConsumer, newOperator } from './helpers/principals.js';
import { activeOperatorAccount, e164, lastCode, otherCode, signInConsumer, uniqueLocalPhone } from './support/auth.js';

const UA = 'SecurityEventsTest/1.0 (investigator)';
let adminToken = '';
const logLines: Record<string, unknown>[] = [];
const h = useHarness(
  test,
  {
    env: { LOG_LEVEL: 'info', OTP_REQUESTS_PER_IP_PER_HOUR: '100000', OTP_COOLDOWN_SECONDS: '1' },
    logDestination: {
      write(line: string) {
        logLines.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  },
  {
    ready: async (started) => {
      adminToken = (await newOperator(started, { role: 'administrator' })).token;
    },
  },
);

interface AuditItem {
  type: string;
  actorType: string | null;
  actorId: string | null;
  subjectType: string | null;
  subjectId: string | null;
  data: Record<string, unknown>;
  ip: string | null;
  userAgent: string | null;
}

/** The AuditEvents of one type and subject, through GET /audit-events (newest first). */
async function audited(type: string, subjectId: string): Promise<AuditItem[]> {
  const res = await client(h.url).get(`/audit-events?type=${encodeURIComponent(type)}&subjectId=${subjectId}&pageSize=50`, { token: adminToken });
  if (res.status !== 200) throw new Error(`GET /audit-events: ${res.status} ${res.text}`);
  return res.body.items as AuditItem[];
}

function fromThisClient(t: { is: (a: unknown, b: unknown, m?: string) => void; regex: (a: string, r: RegExp, m?: string) => void }, e: AuditItem | undefined) {
  if (!e) throw new Error('no event');
  t.regex(e.ip ?? '', /^(::ffff:)?127\.0\.0\.1$|^::1$/, 'the client address');
  t.is(e.userAgent, UA, 'the client user agent');
}

test('a consumer sign-in, and a wrong code for that number, are audited with the address and user agent', async (t) => {
  const api = client(h.url);
  const phone = uniqueLocalPhone();
  const consumer = await signInConsumer(h, phone, { 'user-agent': UA });
  const [signedIn] = await audited('auth.signed_in', consumer.userId);
  t.like(signedIn, { actorType: 'consumer', actorId: consumer.userId, subjectType: 'user', data: { method: 'otp' } });
  t.regex(String(signedIn!.data.sessionId), /^[0-9a-f-]{36}$/);
  fromThisClient(t, signedIn);

  await new Promise((r) => setTimeout(r, 1100));
  t.is((await api.post('/auth/otp/request', { json: { phone } })).status, 200);
  const wrong = await api.post('/auth/otp/verify', { json: { phone, code: otherCode(lastCode(h, e164(phone))) }, headers: { 'user-agent': UA } });
  t.is(wrong.status, 400);
  const [failed] = await audited('auth.sign_in_failed', consumer.userId);
  t.like(failed, { actorType: 'anonymous', actorId: null, subjectType: 'user', data: { method: 'otp', reason: 'otp_invalid' } });
  fromThisClient(t, failed);
  t.false(JSON.stringify(failed).includes(e164(phone).slice(4)), 'never the phone number');
});

test('a wrong code for a number without an account names a keyed digest of the number, never the number', async (t) => {
  const api = client(h.url);
  const phone = uniqueLocalPhone();
  t.is((await api.post('/auth/otp/request', { json: { phone } })).status, 200);
  const wrong = await api.post('/auth/otp/verify', { json: { phone, code: otherCode(lastCode(h, e164(phone))) }, headers: { 'user-agent': UA } });
  t.is(wrong.status, 400);
  const rows = await h.deps.db('audit_events').where({ type: 'auth.sign_in_failed', subjectType: 'phone_key' }).orderBy('id', 'desc');
  t.true(rows.length >= 1);
  const [failed] = await audited('auth.sign_in_failed', rows[0].subjectId);
  t.like(failed, { subjectType: 'phone_key', data: { method: 'otp', reason: 'otp_invalid' } });
  fromThisClient(t, failed);
  for (const row of rows) t.false(JSON.stringify(row).includes(e164(phone).slice(4)), 'never the phone number');
});

test('a staff sign-in, a wrong password and an unknown identifier are audited with the address and user agent', async (t) => {
  const api = client(h.url);
  const op = await activeOperatorAccount(h, adminToken);
  const ok = await api.post('/auth/operator/login', { json: { identifier: op.identifier, password: op.password }, headers: { 'user-agent': UA } });
  t.is(ok.status, 200);
  const signedIn = (await audited('auth.signed_in', op.operatorId)).find((e) => e.userAgent === UA);
  t.like(signedIn, { actorType: 'operator', actorId: op.operatorId, subjectType: 'operator', data: { method: 'password' } });
  fromThisClient(t, signedIn);

  const wrong = await api.post('/auth/operator/login', { json: { identifier: op.identifier, password: 'not-the-password' }, headers: { 'user-agent': UA } });
  t.is(wrong.status, 401);
  const [failed] = await audited('auth.sign_in_failed', op.operatorId);
  t.like(failed, { actorType: 'anonymous', subjectType: 'operator', data: { method: 'password', reason: 'invalid_credentials' } });
  fromThisClient(t, failed);
  t.false(JSON.stringify(failed).includes('not-the-password'));

  const typo = `nobody-${Date.now()}`;
  t.is((await api.post('/auth/operator/login', { json: { identifier: typo, password: 'whatever-1' }, headers: { 'user-agent': UA } })).status, 401);
  const unknown = await h.deps.db('audit_events').where({ type: 'auth.sign_in_failed' }).whereNull('subjectId').orderBy('id', 'desc').first();
  t.like(unknown, { subjectType: null, userAgent: UA });
  t.false(JSON.stringify(unknown).includes(typo), 'never the identifier typed (it may be a password)');
});

test('enabling the second factor and an administrator resetting it are audited with the address and user agent', async (t) => {
  const api = client(h.url);
  const op = await activeOperatorAccount(h, adminToken);
  const token = op.accessToken;
  const setup = await api.post('/auth/operator/mfa/setup', { token, json: { password: op.password }, headers: { 'user-agent': UA } });
  t.is(setup.status, 200);
  const confirm = await api.post('/auth/operator/mfa/confirm', {
    token,
    json: { code: codeAt(setup.body.secret), password: op.password },
    headers: { 'user-agent': UA },
  });
  t.is(confirm.status, 200);
  fromThisClient(t, (await audited('operator.mfa_enabled', op.operatorId))[0]);

  const reset = await api.post(`/operators/${op.operatorId}/reset-mfa`, { token: adminToken, headers: { 'user-agent': UA } });
  t.is(reset.status, 200);
  fromThisClient(t, (await audited('operator.mfa_reset', op.operatorId))[0]);
});

test('the data export is audited as user.exported with the address and user agent', async (t) => {
  const consumer = await newConsumer(h);
  const { proofToken } = await issueProofToken(h.deps, consumer.userId, consumer.sessionId);
  const res = await client(h.url).get(`/users/${consumer.userId}/export`, {
    token: consumer.token,
    headers: { 'user-agent': UA, 'x-proof-token': proofToken },
  });
  t.is(res.status, 200);
  const [exported] = await audited('user.exported', consumer.userId);
  t.like(exported, { actorType: 'consumer', actorId: consumer.userId, subjectType: 'user' });
  t.true((exported!.data.sections as string[]).includes('profile'));
  fromThisClient(t, exported);
});

test('a phone change is audited with the address and user agent, the numbers masked', async (t) => {
  const consumer = await newConsumer(h);
  const { proofToken } = await issueProofToken(h.deps, consumer.userId, consumer.sessionId);
  const newPhone = e164(uniqueLocalPhone());
  const res = await client(h.url).patch(`/users/${consumer.userId}`, {
    token: consumer.token,
    json: { phone: newPhone, proofToken },
    headers: { 'user-agent': UA },
  });
  t.is(res.status, 200, res.text);
  const [changed] = await audited('profile.changed', consumer.userId);
  t.deepEqual(changed!.data.fields, ['phone']);
  fromThisClient(t, changed);
  t.false(JSON.stringify(changed).includes(newPhone), 'the number is masked');
});

test('the access log names the caller type, id and session, never a phone or a name', async (t) => {
  const consumer = await newConsumer(h);
  const phone = (await h.deps.db('users').where({ id: consumer.userId }).first()).phone as string;
  const res = await client(h.url).get(`/users/${consumer.userId}`, { token: consumer.token });
  t.is(res.status, 200);
  await new Promise((r) => setTimeout(r, 50));
  const line = logLines.find((l) => l.msg === 'request' && l.route === '/users/{id}' && l.subjectId === consumer.userId);
  t.like(line, { subjectType: 'consumer', subjectId: consumer.userId, sessionId: consumer.sessionId, status: 200 });
  t.regex(String(line?.ip), /127\.0\.0\.1|::1/);
  t.false(JSON.stringify(logLines).includes(phone.slice(4)), 'no phone in any log line');

  const op = await newOperator(h, { role: 'administrator' });
  await client(h.url).get('/audit-events', { token: op.token });
  await new Promise((r) => setTimeout(r, 50));
  t.like(
    logLines.find((l) => l.msg === 'request' && l.route === '/audit-events' && l.subjectId === op.operatorId),
    { subjectType: 'operator', sessionId: op.sessionId },
  );
});
