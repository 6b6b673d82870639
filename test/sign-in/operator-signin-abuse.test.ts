/**
 * Operator sign-in cannot be turned against the organisation. Guessing one
 * account's password from an office address neither blocks the colleagues behind that address nor
 * leaves the organisation without its last administrator: an administrator's lock lapses after
 * ADMIN_LOCK_SECONDS (test/sign-in/staff-lock.test.ts: the windows, their growth and the cap), and `npm run unlock-operator` unlocks any account without database surgery.
 * SPEC's 403 account_locked (also with the right password) and the administrator's reset stay.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { ensureFirstAdministrator } from '../../features/staff/service.js';
import { ROOT, startHarness, type Harness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newOperator } from '../helpers/principals.js';
import { activeOperatorAccount } from '../support/auth.js';

let h: Harness;
test.before(async () => {
  h = await startHarness({
    env: {
      TRUST_PROXY: 'true',
      OPERATOR_LOGINS_PER_IP_PER_HOUR: '8',
      OPERATOR_LOGIN_FAILURES_PER_IP_PER_HOUR: '1000',
      ADMIN_IDENTIFIER: 'the-only-admin',
      ADMIN_PASSWORD: 'only-admin-pass-1',
      ADMIN_LOCK_SECONDS: '900',
    },
  });
  await ensureFirstAdministrator(h.deps);
});
test.after.always(async () => {
  await h?.stop();
});

const login = (identifier: string, password: string, ip = '203.0.113.7') =>
  client(h.url).post('/auth/operator/login', { json: { identifier, password }, headers: { 'x-forwarded-for': ip } });

test.serial('anyone can lock the only administrator (403 account_locked), but the lock lapses: no shell or Redis needed to get back in', async (t) => {
  for (let i = 0; i < 5; i++) await login('the-only-admin', `guess-${i}`);
  const locked = await login('the-only-admin', 'only-admin-pass-1');
  t.is(locked.status, 403);
  t.is(locked.body.error, 'account_locked');
  // ADMIN_LOCK_SECONDS later (the clock is moved by moving the lock's end back; test/sign-in/staff-lock.test.ts waits for real).
  await h.deps
    .db('operators')
    .where({ identifier: 'the-only-admin' })
    .update({ lockedUntil: new Date(Date.now() - 1_000) });
  const back = await login('the-only-admin', 'only-admin-pass-1');
  t.is(back.status, 200, back.text);
  const audit = await h.deps.db('auditEvents').where({ type: 'operator.locked' });
  t.is(audit.length, 1);
  t.like(audit[0].data, { failedAttempts: 5, lockSeconds: 900 });
});

test.serial('guessing one account from an office address does not block the other operators behind it', async (t) => {
  const admin = await login('the-only-admin', 'only-admin-pass-1', '198.51.100.1');
  const colleague = await activeOperatorAccount(h, admin.body.accessToken);
  const office = '192.0.2.44';
  // Far more failed guesses from the office address than the per-address-and-account cap (8).
  for (let i = 0; i < 12; i++) await login('the-only-admin', `spray-${i}`, office);
  const guessed = await login('the-only-admin', 'only-admin-pass-1', office);
  t.is(guessed.status, 429, 'that account, from that address, is capped');
  t.is(guessed.body.error, 'rate_limited');
  const ok = await login(colleague.identifier, colleague.password, office);
  t.is(ok.status, 200, `a colleague behind the same address signs in: ${ok.text}`);
});

/**
 * Runs a script without blocking this process: a blocked event loop lets the server's keep-alive sockets
 * expire under the client's feet (a `fetch failed` that says nothing about the service).
 */
function run(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(path.join(ROOT, 'node_modules', '.bin', 'tsx'), args, { cwd: ROOT, env: { ...process.env, DATABASE_URL: h.db.url } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

test.serial('npm run unlock-operator unlocks a locked account (audited); the password is unchanged', async (t) => {
  // (The only administrator is locked again by the previous test's guesses: a second one manages.)
  const admin = await newOperator(h, { role: 'administrator' });
  const op = await activeOperatorAccount(h, admin.token);
  for (let i = 0; i < 5; i++) await login(op.identifier, `nope-${i}`, '198.51.100.3');
  t.is((await login(op.identifier, op.password, '198.51.100.4')).body.error, 'account_locked', 'an operator stays locked (only an unlock or a reset)');
  const unlocked = await run(['scripts/unlock-operator.ts', op.identifier.toUpperCase()]);
  t.is(unlocked.status, 0, unlocked.stderr);
  t.regex(unlocked.stdout, /unlocked/);
  t.is((await login(op.identifier, op.password, '198.51.100.5')).status, 200);
  const missing = await run(['scripts/unlock-operator.ts', 'nobody-here']);
  t.is(missing.status, 1);
});

test.serial('password spraying from one address is capped by its failures only', async (t) => {
  const spray = await startHarness({
    env: { OPERATOR_LOGIN_FAILURES_PER_IP_PER_HOUR: '4', ADMIN_IDENTIFIER: 'spray-admin', ADMIN_PASSWORD: 'spray-admin-pass-1' },
  });
  try {
    await ensureFirstAdministrator(spray.deps);
    const api = client(spray.url);
    const attempt = (identifier: string, password: string) => api.post('/auth/operator/login', { json: { identifier, password } });
    // Successes do not count.
    for (let i = 0; i < 6; i++) t.is((await attempt('spray-admin', 'spray-admin-pass-1')).status, 200);
    for (let i = 0; i < 4; i++) t.is((await attempt(`user-${i}`, 'Winter2026!')).status, 401);
    const capped = await attempt('spray-admin', 'spray-admin-pass-1');
    t.is(capped.status, 429);
    t.is(capped.body.error, 'rate_limited');
    t.true(Number(capped.headers.get('retry-after')) > 0);
  } finally {
    await spray.stop();
  }
});
