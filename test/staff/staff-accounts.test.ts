/**
 * Staff accounts (SPEC 12.2) through HTTP: the TOTP second factor (setup, confirmation, recovery codes,
 * replay, the lock, an administrator's reset), the STAFF_MFA=required policy (a second web process of
 * the same deployment), staff session limits, temporary-password expiry and weak new passwords.
 * Codes are computed the way an authenticator app does (RFC 6238 via the same library).
 */
import test from 'ava';
import { createDeps, closeDeps, type AppDeps } from '../../processes/web/deps.js';
import { startWebProcess, type RunningWebProcess } from '../../processes/web.js';
import { hashPassword } from '../../features/sign-in/passwords.js';
import { codeAt } from '../../features/sign-in/totp.js';
import { decodeJwt } from 'jose';
import { createLogger } from '../../platform/logger.js';
import { freePort } from '../../scripts/lib/private-services.js';
import { useHarness, type Harness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newOperator } from '../helpers/principals.js';

const IDLE_SECONDS = 2;
const MAX_SECONDS = 5;
type ExtraWeb = { url: string; deps: AppDeps; web: RunningWebProcess };
let requiredWeb: ExtraWeb;
/** Short staff session limits (a web process of its own: the limits hold for every request it serves). */
let shortSessionsWeb: ExtraWeb;

async function extraWeb(hh: Harness, env: Record<string, string>): Promise<ExtraWeb> {
  const config = hh.configFor({ PORT: String(await freePort()), ...env });
  const deps = createDeps(config, { logger: createLogger({ level: 'silent' }) });
  const web = await startWebProcess(deps, { port: config.http.port, poller: false });
  return { url: web.web.url, deps, web };
}

const h = useHarness(
  test,
  { env: { OPERATOR_MAX_FAILED_LOGINS: '5' } },
  {
    ready: async (hh: Harness) => {
      requiredWeb = await extraWeb(hh, { STAFF_MFA: 'required' });
      shortSessionsWeb = await extraWeb(hh, { STAFF_SESSION_IDLE_SECONDS: String(IDLE_SECONDS), STAFF_SESSION_MAX_SECONDS: String(MAX_SECONDS) });
    },
    beforeStop: async () => {
      for (const e of [requiredWeb, shortSessionsWeb]) {
        await e.web.close();
        await closeDeps(e.deps);
      }
    },
  },
);

let seq = 0;
/** An operator who can sign in with `password` (not flagged). */
async function staff(opts: { role?: 'operator' | 'administrator'; password?: string } = {}): Promise<{ id: string; identifier: string; password: string }> {
  const password = opts.password ?? `staff-pass-${++seq}-long`;
  const identifier = `staff-${Date.now()}-${++seq}`;
  const [row] = await h.deps
    .db('operators')
    .insert({
      identifier,
      displayName: 'Staff',
      role: opts.role ?? 'operator',
      status: 'active',
      mustResetPassword: false,
      passwordHash: await hashPassword(password),
    })
    .returning('id');
  return { id: row.id, identifier, password };
}

const login = (body: Record<string, string>, base = h.url) => client(base).post('/auth/operator/login', { json: body });

/** Signs in, sets up and confirms MFA; returns the secret and the recovery codes. */
async function enableMfa(op: { identifier: string; password: string }, base = h.url): Promise<{ secret: string; recoveryCodes: string[]; token: string }> {
  const signIn = await login({ identifier: op.identifier, password: op.password }, base);
  if (signIn.status !== 200) throw new Error(`login: ${signIn.status} ${signIn.text}`);
  const token = signIn.body.accessToken;
  const setup = await client(base).post('/auth/operator/mfa/setup', { token, json: { password: op.password } });
  if (setup.status !== 200) throw new Error(`setup: ${setup.status} ${setup.text}`);
  const confirm = await client(base).post('/auth/operator/mfa/confirm', { token, json: { code: codeAt(setup.body.secret), password: op.password } });
  if (confirm.status !== 200) throw new Error(`confirm: ${confirm.status} ${confirm.text}`);
  return { secret: setup.body.secret, recoveryCodes: confirm.body.recoveryCodes, token };
}

test('MFA setup and confirmation: the secret is sealed at rest, 10 recovery codes are stored hashed', async (t) => {
  const op = await staff();
  const signIn = await login({ identifier: op.identifier, password: op.password });
  const token = signIn.body.accessToken;
  const setup = await client(h.url).post('/auth/operator/mfa/setup', { token, json: { password: op.password } });
  t.is(setup.status, 200, setup.text);
  t.regex(setup.body.secret, /^[A-Z2-7]{32}$/);
  t.true(setup.body.otpauthUri.startsWith('otpauth://totp/'));
  t.true(setup.body.otpauthUri.includes(`secret=${setup.body.secret}`));
  t.is(setup.headers.get('cache-control'), 'no-store');
  const row = await h.deps.db('operators').where({ id: op.id }).first();
  t.truthy(row.mfaPendingSecret);
  t.false(String(row.mfaPendingSecret).includes(setup.body.secret), 'never stored in clear');

  const wrong = await client(h.url).post('/auth/operator/mfa/confirm', {
    token,
    json: { code: codeAt(setup.body.secret, Date.now() - 10 * 60_000), password: op.password },
  });
  t.is(wrong.status, 400);
  t.is(wrong.body.error, 'otp_invalid');
  const ok = await client(h.url).post('/auth/operator/mfa/confirm', { token, json: { code: codeAt(setup.body.secret), password: op.password } });
  t.is(ok.status, 200, ok.text);
  t.is(ok.body.status, 'mfa_enabled');
  t.is(ok.body.recoveryCodes.length, 10);
  t.is(new Set(ok.body.recoveryCodes).size, 10);
  const stored = await h.deps.db('operatorRecoveryCodes').where({ operatorId: op.id });
  t.is(stored.length, 10);
  for (const code of ok.body.recoveryCodes) t.false(stored.some((s: { codeHash: string }) => s.codeHash.includes(code.replace(/-/g, ''))));
  const after = await h.deps.db('operators').where({ id: op.id }).first();
  t.false(String(after.mfaSecret).includes(setup.body.secret));
  t.truthy(after.mfaEnabledAt);
  // A second setup is refused while one is enabled.
  t.is((await client(h.url).post('/auth/operator/mfa/setup', { token, json: { password: op.password } })).status, 409);
  t.is((await h.deps.db('auditEvents').where({ type: 'operator.mfa_enabled', subjectId: op.id })).length, 1);
});

test('sign-in with MFA: missing or wrong otp is 401 mfa_required without a token; a wrong one counts toward the lock; a code is accepted once', async (t) => {
  const op = await staff();
  const { secret } = await enableMfa(op);
  const missing = await login({ identifier: op.identifier, password: op.password });
  t.is(missing.status, 401);
  t.is(missing.body.error, 'mfa_required');
  t.is(missing.body.accessToken, undefined);

  const wrongCode = codeAt(secret, Date.now() - 10 * 60_000);
  const wrong = await login({ identifier: op.identifier, password: op.password, otp: wrongCode });
  t.is(wrong.status, 401);
  t.is(wrong.body.error, 'mfa_required');
  t.is((await h.deps.db('operators').where({ id: op.id }).first()).failedLoginCount, 1);

  // The confirmation used the current step: the next step's code (within the drift window) signs in, once.
  const next = codeAt(secret, Date.now() + 30_000);
  const [a, b] = await Promise.all([
    login({ identifier: op.identifier, password: op.password, otp: next }),
    login({ identifier: op.identifier, password: op.password, otp: next }),
  ]);
  t.deepEqual([a.status, b.status].sort(), [200, 401], 'two parallel uses of one code: one succeeds');
  const winner = a.status === 200 ? a : b;
  t.is(typeof winner.body.accessToken, 'string');
  const replay = await login({ identifier: op.identifier, password: op.password, otp: next });
  t.is(replay.status, 401);
  t.is(replay.body.error, 'mfa_required');

  // A wrong password is still invalid_credentials, whatever the otp.
  const badPassword = await login({ identifier: op.identifier, password: 'not-the-password', otp: next });
  t.is(badPassword.body.error, 'invalid_credentials');

  // Wrong codes lock the account like wrong passwords.
  for (let i = 0; i < 5; i++) await login({ identifier: op.identifier, password: op.password, otp: wrongCode });
  const locked = await login({ identifier: op.identifier, password: op.password, otp: codeAt(secret, Date.now() + 30_000) });
  t.is(locked.status, 403);
  t.is(locked.body.error, 'account_locked');
});

test('recovery codes sign in once each, also under concurrency', async (t) => {
  const op = await staff();
  const { recoveryCodes } = await enableMfa(op);
  const code = recoveryCodes[0]!;
  const answers = await Promise.all(Array.from({ length: 4 }, () => login({ identifier: op.identifier, password: op.password, otp: code })));
  t.deepEqual(answers.map((r) => r.status).sort(), [200, 401, 401, 401]);
  const again = await login({ identifier: op.identifier, password: op.password, otp: code });
  t.is(again.status, 401);
  t.is(again.body.error, 'mfa_required');
  // Typed in capitals without dashes, another code works.
  const typed = await login({ identifier: op.identifier, password: op.password, otp: recoveryCodes[1]!.replace(/-/g, '').toUpperCase() });
  t.is(typed.status, 200, typed.text);
  const audit = await h.deps.db('auditEvents').where({ type: 'operator.recovery_code_used', subjectId: op.id });
  t.is(audit.length, 2);
});

test("an administrator resets an operator's MFA: audited, sessions end, sign-in without otp; operators may not", async (t) => {
  const op = await staff();
  const { token } = await enableMfa(op);
  const admin = await newOperator(h, { role: 'administrator' });
  const plain = await newOperator(h);
  t.is((await client(h.url).post(`/operators/${op.id}/reset-mfa`, { token: plain.token })).status, 403);
  const res = await client(h.url).post(`/operators/${op.id}/reset-mfa`, { token: admin.token });
  t.is(res.status, 200, res.text);
  t.is(res.body.status, 'mfa_reset');
  t.is(res.body.operator.mfaEnabled, false);
  t.is((await client(h.url).get('/identify/mine', { token })).status, 401, "the operator's sessions ended");
  const audit = await h.deps.db('auditEvents').where({ type: 'operator.mfa_reset', subjectId: op.id }).first();
  t.is(audit.actorId, admin.operatorId);
  t.is(audit.severity, 'high');
  t.is((await h.deps.db('operatorRecoveryCodes').where({ operatorId: op.id })).length, 0);
  const signIn = await login({ identifier: op.identifier, password: op.password });
  t.is(signIn.status, 200, signIn.text);
  t.is((await client(h.url).post('/operators/00000000-0000-4000-8000-000000000000/reset-mfa', { token: admin.token })).status, 404);
});

test('STAFF_MFA=required: an operator without MFA signs in with mfaSetupRequired and may only set it up', async (t) => {
  const op = await staff();
  const api = client(requiredWeb.url);
  const signIn = await login({ identifier: op.identifier, password: op.password }, requiredWeb.url);
  t.is(signIn.status, 200, signIn.text);
  t.is(signIn.body.mfaSetupRequired, true);
  const token = signIn.body.accessToken;
  const refused = await api.get('/identify/mine', { token });
  t.is(refused.status, 403);
  t.is(refused.body.error, 'mfa_setup_required');
  const setup = await api.post('/auth/operator/mfa/setup', { token, json: { password: op.password } });
  t.is(setup.status, 200, setup.text);
  const confirm = await api.post('/auth/operator/mfa/confirm', { token, json: { code: codeAt(setup.body.secret), password: op.password } });
  t.is(confirm.status, 200, confirm.text);
  t.is((await api.get('/identify/mine', { token })).status, 200, 'the same session goes on once MFA is on');
  const next = await login({ identifier: op.identifier, password: op.password, otp: codeAt(setup.body.secret, Date.now() + 30_000) }, requiredWeb.url);
  t.is(next.status, 200);
  t.is(next.body.mfaSetupRequired, undefined);
  // The optional policy (the main web process) does not ask.
  const other = await staff();
  const optional = await login({ identifier: other.identifier, password: other.password });
  t.is(optional.body.mfaSetupRequired, undefined);
  t.is((await client(h.url).get('/identify/mine', { token: optional.body.accessToken })).status, 200);
});

test('new passwords that are common or breached are 400 weak_password', async (t) => {
  const op = await staff();
  const signIn = await login({ identifier: op.identifier, password: op.password });
  const token = signIn.body.accessToken;
  for (const weak of ['password123', 'Password1!', 'qwertyuiop', 'iloveyou2', op.identifier]) {
    const res = await client(h.url).post('/auth/operator/set-password', { token, json: { currentPassword: op.password, newPassword: weak } });
    t.is(res.status, 400, weak);
    t.is(res.body.error, 'weak_password', weak);
  }
  const ok = await client(h.url).post('/auth/operator/set-password', { token, json: { currentPassword: op.password, newPassword: 'amber lantern orbit 42' } });
  t.is(ok.status, 200, ok.text);
});

test('a temporary password expires after TEMP_PASSWORD_TTL_SECONDS: 403 temporary_password_expired', async (t) => {
  const admin = await newOperator(h, { role: 'administrator' });
  const created = await client(h.url).post('/operators', { token: admin.token, json: { identifier: `temp-${Date.now()}`, displayName: 'Temp' } });
  t.is(created.status, 201, created.text);
  const { operator, temporaryPassword } = created.body;
  // A day and a second later (the row's clock moved back instead of waiting).
  await h.deps
    .db('operators')
    .where({ id: operator.id })
    .update({ passwordSetAt: h.deps.db.raw(`now() - interval '86401 seconds'`) });
  const expired = await login({ identifier: operator.identifier, password: temporaryPassword });
  t.is(expired.status, 403);
  t.is(expired.body.error, 'temporary_password_expired');
  // A reset issues a fresh one, which works.
  const reset = await client(h.url).post(`/operators/${operator.id}/reset-password`, { token: admin.token });
  const fresh = await login({ identifier: operator.identifier, password: reset.body.temporaryPassword });
  t.is(fresh.status, 200, fresh.text);
  t.is(fresh.body.mustResetPassword, true);
});

test('staff sessions: the idle limit and the absolute limit end refresh with 401 invalid_refresh_token', async (t) => {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const op = await staff();
  // Idle: a refresh token not used within the idle limit is refused.
  const idle = await login({ identifier: op.identifier, password: op.password }, shortSessionsWeb.url);
  t.is(idle.body.refreshExpiresIn, IDLE_SECONDS);
  await sleep(IDLE_SECONDS * 1000 + 300);
  const late = await client(shortSessionsWeb.url).post('/auth/refresh', { json: { refreshToken: idle.body.refreshToken } });
  t.is(late.status, 401);
  t.is(late.body.error, 'invalid_refresh_token');

  // Absolute: refreshed within the idle limit each time, the session still ends MAX_SECONDS after sign-in.
  const first = await login({ identifier: op.identifier, password: op.password }, shortSessionsWeb.url);
  const session = await h.deps
    .db('sessions')
    .where({ id: decodeJwt(first.body.accessToken).sid as string })
    .first();
  const startedAt = new Date(session.createdAt).getTime();
  let refreshToken = first.body.refreshToken;
  let accessToken = first.body.accessToken;
  let last = 200;
  let refusedAfterMs = NaN;
  while (Date.now() - startedAt < (MAX_SECONDS + 15) * 1000) {
    await sleep(1200);
    const r = await client(shortSessionsWeb.url).post('/auth/refresh', { json: { refreshToken } });
    last = r.status;
    if (r.status !== 200) {
      refusedAfterMs = Date.now() - startedAt;
      t.is(r.body.error, 'invalid_refresh_token');
      break;
    }
    refreshToken = r.body.refreshToken;
    accessToken = r.body.accessToken;
  }
  t.is(last, 401);
  t.true(refusedAfterMs >= MAX_SECONDS * 1000 - 100, `refused only past the absolute limit (${refusedAfterMs} ms)`);
  // The session's last access token ends with it, although its own 900 s are not over.
  const late2 = await client(shortSessionsWeb.url).get('/identify/mine', { token: accessToken });
  t.is(late2.status, 401);
});
