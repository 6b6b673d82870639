/**
 * Staff devices (SPEC 14.2), through HTTP: a successful sign-in answers `deviceToken`; a sign-in that
 * presents it is judged by the device's own count, so a stranger's wrong passwords lock the account for
 * everyone else but never for its known devices; while locked, a wrong password answers exactly as an
 * unknown identifier does.
 */
import test from 'ava';
import { hashPassword } from '../../features/sign-in/passwords.js';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';

const h = useHarness(test, {
  env: {
    ADMIN_LOCK_SECONDS: '0',
    OPERATOR_MAX_FAILED_LOGINS: '5',
    OPERATOR_LOGINS_PER_IP_PER_HOUR: '1000',
    OPERATOR_LOGIN_FAILURES_PER_IP_PER_HOUR: '1000',
  },
});

let seq = 0;
async function staff(role: 'operator' | 'administrator'): Promise<{ id: string; identifier: string; password: string }> {
  const password = `device-pass-${++seq}-long`;
  const identifier = `device-${role}-${Date.now()}-${seq}`;
  const [row] = await h.deps
    .db('operators')
    .insert({ identifier, displayName: 'Staff', role, status: 'active', mustResetPassword: false, passwordHash: await hashPassword(password) })
    .returning('id');
  return { id: row.id, identifier, password };
}

const login = (body: Record<string, string>) => client(h.url).post('/auth/operator/login', { json: body });

test('a sign-in answers an opaque deviceToken (and the HttpOnly cookie); only a keyed hash of it is stored', async (t) => {
  const op = await staff('operator');
  const res = await login({ identifier: op.identifier, password: op.password });
  t.is(res.status, 200, res.text);
  t.regex(res.body.deviceToken, /^[A-Za-z0-9_-]{43}$/);
  const cookie = res.headers.get('set-cookie') ?? '';
  t.regex(cookie, /faceid_staff_device=[A-Za-z0-9_-]{43}/);
  t.regex(cookie, /httponly/i);
  t.regex(cookie, /samesite=strict/i);
  t.regex(cookie, /path=\/auth\/operator\/login/i);
  const rows = await h.deps.db('operatorDevices').where({ operatorId: op.id });
  t.is(rows.length, 1);
  t.false(JSON.stringify(rows).includes(res.body.deviceToken), 'the token itself is not stored');
  t.not(rows[0].tokenHash, res.body.deviceToken);
  const days = (new Date(rows[0].expiresAt).getTime() - Date.now()) / 86_400_000;
  t.true(days > 179.9 && days <= 180, `valid ${days} days`);
});

for (const role of ['operator', 'administrator'] as const) {
  test(`${role}: a stranger's wrong passwords lock the account, never its known device; a locked account answers a wrong password as an unknown identifier`, async (t) => {
    const op = await staff(role);
    const first = await login({ identifier: op.identifier, password: op.password });
    t.is(first.status, 200);
    const deviceToken = first.body.deviceToken as string;

    // The stranger: 25 wrong passwords without a device token. Every answer is the unknown identifier's.
    const unknown = await login({ identifier: `nobody-${Date.now()}`, password: 'wrong-password' });
    for (let i = 1; i <= 25; i++) {
      const res = await login({ identifier: op.identifier, password: `wrong-${i}` });
      t.is(res.status, 401, `failure ${i}`);
      t.deepEqual(res.body, unknown.body, `failure ${i} answers as an unknown identifier`);
    }
    t.truthy((await h.deps.db('operators').where({ id: op.id }).first()).lockedAt, 'the account is locked');
    // The right password without the device: 403 account_locked (only someone who knows it is told).
    const noDevice = await login({ identifier: op.identifier, password: op.password });
    t.is(noDevice.status, 403);
    t.is(noDevice.body.error, 'account_locked');

    // The owner's device still signs in, and gets its own token back.
    const owner = await login({ identifier: op.identifier, password: op.password, deviceToken });
    t.is(owner.status, 200, owner.text);
    t.is(owner.body.deviceToken, deviceToken);
  });
}

test("5 wrong passwords with a device token lock the device, not the account; the account's count is untouched", async (t) => {
  const op = await staff('operator');
  const deviceToken = (await login({ identifier: op.identifier, password: op.password })).body.deviceToken as string;
  for (let i = 1; i <= 5; i++) {
    const res = await login({ identifier: op.identifier, password: `wrong-${i}`, deviceToken });
    t.is(res.status, 401);
    t.is(res.body.error, 'invalid_credentials');
  }
  const row = await h.deps.db('operators').where({ id: op.id }).first();
  t.is(row.lockedAt, null, 'the account is not locked');
  t.is(row.failedLoginCount, 0, "the device's failures are not the account's");
  const [event] = await h.deps.db('auditEvents').where({ type: 'operator.device_locked', subjectId: op.id });
  t.like(event, { severity: 'high', data: { failedAttempts: 5 } });

  // The locked device is no longer recognised: its sign-in counts toward the account like any other,
  // and a success answers a new token.
  const again = await login({ identifier: op.identifier, password: op.password, deviceToken });
  t.is(again.status, 200);
  t.not(again.body.deviceToken, deviceToken);
});

test("another account's device token, or a made-up one, is not a device of this account", async (t) => {
  const a = await staff('operator');
  const b = await staff('operator');
  const tokenOfA = (await login({ identifier: a.identifier, password: a.password })).body.deviceToken as string;
  for (let i = 1; i <= 5; i++) await login({ identifier: b.identifier, password: `wrong-${i}`, deviceToken: i % 2 ? tokenOfA : 'made-up-token' });
  const locked = await login({ identifier: b.identifier, password: b.password, deviceToken: tokenOfA });
  t.is(locked.status, 403);
  t.is(locked.body.error, 'account_locked');
});

test('the browser keeps the device in its cookie: a sign-in with the cookie alone is judged by the device', async (t) => {
  const op = await staff('operator');
  const first = await login({ identifier: op.identifier, password: op.password });
  const cookie = (first.headers.get('set-cookie') ?? '').split(';')[0]!;
  for (let i = 1; i <= 5; i++) await login({ identifier: op.identifier, password: `wrong-${i}` });
  const res = await client(h.url).post('/auth/operator/login', { json: { identifier: op.identifier, password: op.password }, headers: { cookie } });
  t.is(res.status, 200, res.text);
});

test('MFA setup and its confirmation require the current password: a wrong one is 401 invalid_credentials and counts toward the lock', async (t) => {
  const op = await staff('operator');
  const token = (await login({ identifier: op.identifier, password: op.password })).body.accessToken as string;
  const api = client(h.url);
  t.is((await api.post('/auth/operator/mfa/setup', { token })).status, 400, 'no password: the schema refuses it');
  const wrong = await api.post('/auth/operator/mfa/setup', { token, json: { password: 'not-the-password' } });
  t.is(wrong.status, 401);
  t.is(wrong.body.error, 'invalid_credentials');
  t.is((await h.deps.db('operators').where({ id: op.id }).first()).failedLoginCount, 1, 'counted toward the lock');
  const setup = await api.post('/auth/operator/mfa/setup', { token, json: { password: op.password } });
  t.is(setup.status, 200, setup.text);
  const { codeAt } = await import('../../features/sign-in/totp.js');
  const wrongConfirm = await api.post('/auth/operator/mfa/confirm', { token, json: { code: codeAt(setup.body.secret), password: 'not-the-password' } });
  t.is(wrongConfirm.status, 401);
  t.is(wrongConfirm.body.error, 'invalid_credentials');
  t.falsy((await h.deps.db('operators').where({ id: op.id }).first()).mfaEnabledAt, 'not enabled by a wrong password');
  t.is((await h.deps.db('operators').where({ id: op.id }).first()).failedLoginCount, 2);
  // The fifth wrong password locks the account and ends the session that guessed.
  for (let i = 0; i < 3; i++) await api.post('/auth/operator/mfa/setup', { token, json: { password: `wrong-${i}` } });
  t.truthy((await h.deps.db('operators').where({ id: op.id }).first()).lockedAt);
  t.is((await api.post('/auth/operator/mfa/setup', { token, json: { password: op.password } })).status, 401, 'the session ended with the lock');
});
