/**
 * The staff lock of SPEC 13.3, through HTTP: 5 consecutive failed sign-ins (a wrong password or a wrong
 * `otp`) lock an administrator for ADMIN_LOCK_SECONDS, each further lock twice as long; the count runs
 * on across the locks (only a successful sign-in clears it), and STAFF_MAX_FAILURES failures lock the
 * account until another administrator's reset. The failure that locks answers as any other failure
 * (SPEC 14.2: a lock is told only to the right password). Each lock is an AuditEvent `operator.locked` and counts
 * in `operator_locks_total`. ADMIN_LOCK_SECONDS is 2 here, so the windows are 2, 4 and 8 seconds
 * (the tests run one at a time: on a loaded machine a window must outlast the requests that check it).
 */
import test from 'ava';
import { setTimeout as sleep } from 'node:timers/promises';
import { hashPassword } from '../../features/sign-in/passwords.js';
import { codeAt } from '../../features/sign-in/totp.js';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newOperator } from '../helpers/principals.js';
import { otherCode } from '../support/auth.js';

const h = useHarness(test, {
  env: {
    ADMIN_LOCK_SECONDS: '2',
    OPERATOR_MAX_FAILED_LOGINS: '5',
    STAFF_MAX_FAILURES: '20',
    OPERATOR_LOGINS_PER_IP_PER_HOUR: '1000',
    OPERATOR_LOGIN_FAILURES_PER_IP_PER_HOUR: '1000',
  },
});

let seq = 0;
async function staff(role: 'operator' | 'administrator'): Promise<{ id: string; identifier: string; password: string }> {
  const password = `lock-pass-${++seq}-long`;
  const identifier = `lock-${role}-${Date.now()}-${seq}`;
  const [row] = await h.deps
    .db('operators')
    .insert({ identifier, displayName: 'Staff', role, status: 'active', mustResetPassword: false, passwordHash: await hashPassword(password) })
    .returning('id');
  return { id: row.id, identifier, password };
}

const login = (body: Record<string, string>) => client(h.url).post('/auth/operator/login', { json: body });

async function fail(t: { is: (a: unknown, b: unknown, m?: string) => void }, identifier: string, times: number, lastAnswer: string) {
  for (let i = 1; i <= times; i++) {
    const res = await login({ identifier, password: `wrong-${i}` });
    t.is(res.body.error, i < times ? 'invalid_credentials' : lastAnswer, `failure ${i} of ${times}`);
  }
}

const lockEvents = async (id: string) =>
  (await h.deps.db('auditEvents').where({ type: 'operator.locked', subjectId: id }).orderBy('createdAt')).map((e) => e.data as Record<string, unknown>);

test.serial('an administrator locked by 5 wrong passwords signs in again once ADMIN_LOCK_SECONDS have passed', async (t) => {
  const admin = await staff('administrator');
  await fail(t, admin.identifier, 5, 'invalid_credentials');
  const locked = await login({ identifier: admin.identifier, password: admin.password });
  t.is(locked.status, 403);
  t.is(locked.body.error, 'account_locked', 'even the right password while locked');
  await sleep(2_300);
  const back = await login({ identifier: admin.identifier, password: admin.password });
  t.is(back.status, 200, back.text);
  const [event] = await lockEvents(admin.id);
  t.like(event, { failedAttempts: 5, via: 'login', lockSeconds: 2 });
});

test.serial(
  'the failures count across lock windows (wrong otp codes too), each lock doubles, and STAFF_MAX_FAILURES locks until another administrator resets',
  async (t) => {
    const admin = await staff('administrator');
    // A second factor: the password is known (phished), the code is guessed.
    const first = await login({ identifier: admin.identifier, password: admin.password });
    const token = first.body.accessToken;
    const setup = await client(h.url).post('/auth/operator/mfa/setup', { token, json: { password: admin.password } });
    t.is((await client(h.url).post('/auth/operator/mfa/confirm', { token, json: { code: codeAt(setup.body.secret), password: admin.password } })).status, 200);
    const guess = () => login({ identifier: admin.identifier, password: admin.password, otp: otherCode(codeAt(setup.body.secret)) });
    const guessWindow = async (windowNo: number, lastAnswer: string) => {
      for (let i = 1; i <= 5; i++) {
        const res = await guess();
        t.is(res.body.error, i < 5 ? 'mfa_required' : lastAnswer, `guess ${i} of window ${windowNo}`);
      }
    };

    await guessWindow(0, 'mfa_required');
    await sleep(2_300);
    // The lapse does not clear the count: the next guesses run on from 5 to the lock at 10 (4 s).
    await guessWindow(1, 'mfa_required');
    await sleep(2_300);
    t.is((await guess()).body.error, 'account_locked', 'the second lock outlasts the first');
    await sleep(2_000);
    await guessWindow(2, 'mfa_required');
    await sleep(8_300);
    await guessWindow(3, 'mfa_required');
    t.deepEqual(
      (await lockEvents(admin.id)).map((e) => [e.failedAttempts, e.lockSeconds]),
      [
        [5, 2],
        [10, 4],
        [15, 8],
        [20, null],
      ],
    );

    // The 20th failure locked it for good: longer than the next window (16 s) would have been.
    await sleep(16_500);
    const still = await login({ identifier: admin.identifier, password: admin.password });
    t.is(still.status, 403);
    t.is(still.body.error, 'account_locked');
    const manager = await newOperator(h, { role: 'administrator' });
    const shown = await client(h.url).get(`/operators/${admin.id}`, { token: manager.token });
    t.is(shown.body.operator.locked, true);

    const metrics = await (await fetch(`${h.url}/metrics`)).text();
    t.regex(metrics, /^operator_locks_total\{role="administrator",kind="until_reset"\} [1-9]/m);

    // Another administrator's reset-mfa lets the account in again (the password was never the problem).
    const reset = await client(h.url).post(`/operators/${admin.id}/reset-mfa`, { token: manager.token });
    t.is(reset.status, 200, reset.text);
    t.is(reset.body.operator.locked, false);
    const back = await login({ identifier: admin.identifier, password: admin.password });
    t.is(back.status, 200, back.text);
  },
);

test.serial('only a successful sign-in clears the count', async (t) => {
  const admin = await staff('administrator');
  await fail(t, admin.identifier, 4, 'invalid_credentials');
  t.is((await login({ identifier: admin.identifier, password: admin.password })).status, 200);
  await fail(t, admin.identifier, 5, 'invalid_credentials');
});

test.serial("an operator's lock does not lapse: it waits for an administrator's reset-password", async (t) => {
  const op = await staff('operator');
  await fail(t, op.identifier, 5, 'invalid_credentials');
  await sleep(2_300);
  t.is((await login({ identifier: op.identifier, password: op.password })).body.error, 'account_locked');
  const manager = await newOperator(h, { role: 'administrator' });
  const reset = await client(h.url).post(`/operators/${op.id}/reset-password`, { token: manager.token });
  t.is(reset.status, 200);
  t.is((await login({ identifier: op.identifier, password: reset.body.temporaryPassword })).status, 200);
});
