/**
 * Operator and administrator accounts through HTTP: creation, sign-in, set-password, lockout and its
 * reset, role and status changes, deactivation, the SearchLog of an operator, the last-administrator
 * rule, and the two ways a deployment gets its first administrator.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import path from 'node:path';
import test from 'ava';
import knexFactory from 'knex';
import { ensureFirstAdministrator } from '../../features/staff/service.js';
import { verifyPassword } from '../../features/sign-in/passwords.js';
import { createDb } from '../../platform/database/db.js';
import { ROOT, useHarness, startHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer, newOperator } from '../helpers/principals.js';
import { activeOperatorAccount, createOperatorAccount, uniqueIdentifier } from '../support/auth.js';

// One after another: each test signs in with scrypt-hashed passwords against one shared web process, and
// seventeen at once beside a face-heavy file starved its connection pool (PostgreSQL connects past 3 s).
let admin: { operatorId: string; token: string };

const h = useHarness(
  test,
  {},
  {
    ready: async () => {
      admin = await newOperator(h, { role: 'administrator' });
    },
  },
);

const login = (identifier: string, password: string) => client(h.url).post('/auth/operator/login', { json: { identifier, password } });
const auditOf = (subjectId: string, type: string) => h.deps.db('audit_events').where({ subjectType: 'operator', subjectId, type });
const noHash = (t: { false(v: boolean, m?: string): void }, text: string) => {
  t.false(/passwordHash|password_hash|scrypt\$/.test(text), 'no password hash in the answer');
};

test.serial('an administrator creates an operator: 201, a temporary password, flagged, no hash, audited', async (t) => {
  const identifier = uniqueIdentifier();
  const res = await client(h.url).post('/operators', { token: admin.token, json: { identifier, displayName: 'Ada Operator' } });
  t.is(res.status, 201);
  t.deepEqual(Object.keys(res.body).sort(), ['operator', 'temporaryPassword']);
  const op = res.body.operator;
  t.is(op.identifier, identifier);
  t.is(op.displayName, 'Ada Operator');
  t.is(op.role, 'operator');
  t.is(op.status, 'active');
  t.is(op.mustResetPassword, true);
  t.is(op.orgId, 'default');
  t.is(op.locked, false);
  t.regex(res.body.temporaryPassword, /^[A-Za-z0-9_-]{16}$/);
  noHash(t, res.text);
  t.is(res.headers.get('cache-control'), 'no-store');

  const row = await h.deps.db('operators').where({ id: op.id }).first();
  t.regex(row.passwordHash, /^scrypt\$32768\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{86}$/);
  t.is(row.createdBy, admin.operatorId);
  const audit = await auditOf(op.id, 'operator.created');
  t.is(audit.length, 1);
  t.is(audit[0].actorId, admin.operatorId);
  t.false(JSON.stringify(audit).includes(res.body.temporaryPassword));

  const withRole = await client(h.url).post('/operators', {
    token: admin.token,
    json: { identifier: uniqueIdentifier('adm'), displayName: 'B', role: 'administrator', orgId: 'acme' },
  });
  t.is(withRole.status, 201);
  t.is(withRole.body.operator.role, 'administrator');
  t.is(withRole.body.operator.orgId, 'acme');
});

test.serial('a taken identifier is 409 conflict, whatever its case', async (t) => {
  const identifier = uniqueIdentifier('Taken');
  const api = client(h.url);
  t.is((await api.post('/operators', { token: admin.token, json: { identifier, displayName: 'One' } })).status, 201);
  for (const variant of [identifier, identifier.toLowerCase(), identifier.toUpperCase()]) {
    const res = await api.post('/operators', { token: admin.token, json: { identifier: variant, displayName: 'Two' } });
    t.is(res.status, 409);
    t.is(res.body.error, 'conflict');
  }
});

test.serial('POST /operators validates its body strictly', async (t) => {
  const api = client(h.url);
  for (const json of [
    {},
    { identifier: uniqueIdentifier() },
    { identifier: 'ab', displayName: 'x' },
    { identifier: 'has space', displayName: 'x' },
    { identifier: uniqueIdentifier(), displayName: '' },
    { identifier: uniqueIdentifier(), displayName: 'x', role: 'root' },
    { identifier: uniqueIdentifier(), displayName: 'x', status: 'active' },
    { identifier: uniqueIdentifier(), displayName: 'x', passwordHash: 'scrypt$...' },
  ]) {
    const res = await api.post('/operators', { token: admin.token, json });
    t.is(res.status, 400, JSON.stringify(json));
    t.is(res.body.error, 'validation_failed');
  }
});

test.serial('a flagged operator signs in, is refused everywhere but set-password, and set-password clears the flag', async (t) => {
  const api = client(h.url);
  const created = await createOperatorAccount(h, admin.token, { role: 'administrator' });
  const first = await login(created.identifier, created.temporaryPassword);
  t.is(first.status, 200);
  t.deepEqual(Object.keys(first.body).sort(), [
    'accessToken',
    'deviceToken',
    'expiresIn',
    'mustResetPassword',
    'operatorId',
    'refreshExpiresIn',
    'refreshToken',
    'tokenType',
  ]);
  t.is(first.body.mustResetPassword, true);
  t.is(first.body.operatorId, created.operatorId);
  const token = first.body.accessToken;

  const refused = await api.get(`/operators/${admin.operatorId}/sessions`, { token });
  t.is(refused.status, 403);
  t.is(refused.body.error, 'password_reset_required');

  const wrong = await api.post('/auth/operator/set-password', { token, json: { currentPassword: 'not-the-password', newPassword: 'long-enough-1' } });
  t.is(wrong.status, 401);
  t.is(wrong.body.error, 'invalid_credentials');
  const short = await api.post('/auth/operator/set-password', { token, json: { currentPassword: created.temporaryPassword, newPassword: 'short7!' } });
  t.is(short.status, 400);
  t.is(short.body.error, 'validation_failed');
  const same = await api.post('/auth/operator/set-password', {
    token,
    json: { currentPassword: created.temporaryPassword, newPassword: created.temporaryPassword },
  });
  t.is(same.status, 400);
  t.is(same.body.error, 'validation_failed');
  const extra = await api.post('/auth/operator/set-password', {
    token,
    json: { currentPassword: created.temporaryPassword, newPassword: 'long-enough-1', identifier: 'x' },
  });
  t.is(extra.status, 400);

  const ok = await api.post('/auth/operator/set-password', {
    token,
    json: { currentPassword: created.temporaryPassword, newPassword: 'a brand new passphrase' },
  });
  t.is(ok.status, 200);
  t.deepEqual(ok.body, { status: 'password_set' });
  // The same access token now passes: the flag is read fresh on every request.
  t.is((await api.get(`/operators/${admin.operatorId}/sessions`, { token })).status, 200);

  t.is((await login(created.identifier, created.temporaryPassword)).status, 401, 'the temporary password is gone');
  const again = await login(created.identifier.toUpperCase(), 'a brand new passphrase');
  t.is(again.status, 200, 'identifiers are case-insensitive at sign-in');
  t.is(again.body.mustResetPassword, false);
  t.is((await auditOf(created.operatorId, 'operator.password_set')).length, 1);
});

test.serial("set-password ends the operator's other sessions, not the current one", async (t) => {
  const api = client(h.url);
  const op = await activeOperatorAccount(h, admin.token);
  const a = await login(op.identifier, op.password);
  const b = await login(op.identifier, op.password);
  const res = await api.post('/auth/operator/set-password', {
    token: a.body.accessToken,
    json: { currentPassword: op.password, newPassword: 'yet another passphrase' },
  });
  t.is(res.status, 200);
  t.is((await api.post('/auth/refresh', { json: { refreshToken: a.body.refreshToken } })).status, 200);
  const other = await api.post('/auth/refresh', { json: { refreshToken: b.body.refreshToken } });
  t.is(other.status, 401);
});

// Serial (ava runs serial tests before the concurrent ones): the timing comparison runs on a quiet machine.
test.serial('an unknown identifier and a wrong password get the same answer, in about the same time', async (t) => {
  const op = await activeOperatorAccount(h, admin.token);
  const unknown = await login(`nobody-${randomBytes(4).toString('hex')}`, 'whatever-password');
  const wrong = await login(op.identifier, 'whatever-password');
  t.is(unknown.status, 401);
  t.is(wrong.status, 401);
  t.deepEqual(unknown.body, wrong.body);
  t.is(unknown.body.error, 'invalid_credentials');

  // Both paths run one scrypt check: without the dummy hash, the unknown path would be ~50x faster.
  const time = async (identifier: string) => {
    const started = process.hrtime.bigint();
    await login(identifier, 'whatever-password');
    return Number(process.hrtime.bigint() - started) / 1e6;
  };
  // Two accounts, 4 wrong passwords each: none reaches the lock (the 5th would answer account_locked).
  const others = [await activeOperatorAccount(h, admin.token), await activeOperatorAccount(h, admin.token)];
  const unknownMs: number[] = [];
  const wrongMs: number[] = [];
  for (let i = 0; i < 8; i++) {
    unknownMs.push(await time(`nobody-${randomBytes(4).toString('hex')}`));
    wrongMs.push(await time(others[i % 2]!.identifier));
  }
  // The fastest of each: what the path costs. Other test files run beside this one and only ever add
  // time to a sample, so a median of a few samples can be off by the machine's load, not the code.
  const fastest = (xs: number[]) => Math.min(...xs);
  const ratio = fastest(unknownMs) / fastest(wrongMs);
  t.true(ratio > 0.33 && ratio < 3, `unknown ${fastest(unknownMs).toFixed(1)} ms vs wrong ${fastest(wrongMs).toFixed(1)} ms`);
});

test.serial("5 wrong passwords in a row lock the account, the right password is then refused; an administrator's reset unlocks it", async (t) => {
  const api = client(h.url);
  const op = await activeOperatorAccount(h, admin.token);
  const held = await login(op.identifier, op.password);
  t.is(held.status, 200);
  for (let i = 1; i <= 4; i++) {
    const res = await login(op.identifier, `wrong-${i}`);
    t.is(res.status, 401, `failure ${i}`);
    t.is(res.body.error, 'invalid_credentials');
  }
  // The failure that locks answers as any wrong password (SPEC 14.2: a lock is told only to the right one).
  const fifth = await login(op.identifier, 'wrong-5');
  t.is(fifth.status, 401);
  t.is(fifth.body.error, 'invalid_credentials');
  const right = await login(op.identifier, op.password);
  t.is(right.status, 403);
  t.is(right.body.error, 'account_locked');
  const locks = await auditOf(op.operatorId, 'operator.locked');
  t.is(locks.length, 1);
  t.is(locks[0].severity, 'high');
  t.true((await h.deps.db('operators').where({ id: op.operatorId }).first()).lockedAt !== null);

  const reset = await api.post(`/operators/${op.operatorId}/reset-password`, { token: admin.token });
  t.is(reset.status, 200);
  t.deepEqual(Object.keys(reset.body).sort(), ['mustResetPassword', 'temporaryPassword']);
  t.is(reset.body.mustResetPassword, true);
  t.regex(reset.body.temporaryPassword, /^[A-Za-z0-9_-]{16}$/);
  t.is((await auditOf(op.operatorId, 'operator.password_reset')).length, 1);

  t.is((await login(op.identifier, op.password)).status, 401, 'the old password is gone');
  const after = await login(op.identifier, reset.body.temporaryPassword);
  t.is(after.status, 200);
  t.is(after.body.mustResetPassword, true);
  // Every session from before the reset has ended.
  const old = await api.get(`/operators/${admin.operatorId}/sessions`, { token: held.body.accessToken });
  t.is(old.status, 401);
  t.is((await api.post('/auth/refresh', { json: { refreshToken: held.body.refreshToken } })).status, 401);
  const row = await h.deps.db('operators').where({ id: op.operatorId }).first();
  t.is(row.failedLoginCount, 0);
  t.is(row.lockedAt, null);
});

test.serial('concurrent wrong passwords cannot overshoot the lock', async (t) => {
  const op = await activeOperatorAccount(h, admin.token);
  const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => login(op.identifier, `wrong-${i}`)));
  // Every wrong password answers 401 (SPEC 14.2), locked or not; the lock came once, at the fifth.
  t.is(answers.filter((a) => a.status === 401 && a.body.error === 'invalid_credentials').length, 8);
  t.is((await auditOf(op.operatorId, 'operator.locked')).length, 1);
  t.is((await h.deps.db('operators').where({ id: op.operatorId }).first()).failedLoginCount, 5);
});

test.serial('a success resets the failure count', async (t) => {
  const op = await activeOperatorAccount(h, admin.token);
  for (let i = 0; i < 4; i++) t.is((await login(op.identifier, 'wrong')).status, 401);
  t.is((await login(op.identifier, op.password)).status, 200);
  for (let i = 0; i < 4; i++) t.is((await login(op.identifier, 'wrong')).status, 401);
  t.is((await login(op.identifier, op.password)).status, 200);
});

test.serial('wrong current passwords at set-password count towards the lock, and the guessing session ends', async (t) => {
  const api = client(h.url);
  const op = await activeOperatorAccount(h, admin.token);
  const s = await login(op.identifier, op.password);
  for (let i = 1; i <= 4; i++) {
    const res = await api.post('/auth/operator/set-password', {
      token: s.body.accessToken,
      json: { currentPassword: `guess-${i}`, newPassword: 'whatever-long' },
    });
    t.is(res.status, 401);
  }
  const fifth = await api.post('/auth/operator/set-password', {
    token: s.body.accessToken,
    json: { currentPassword: 'guess-5', newPassword: 'whatever-long' },
  });
  t.is(fifth.status, 403);
  t.is(fifth.body.error, 'account_locked');
  t.is((await api.post('/auth/refresh', { json: { refreshToken: s.body.refreshToken } })).status, 401, 'the guessing session has ended');
  t.is(
    (await api.post('/auth/operator/set-password', { token: s.body.accessToken, json: { currentPassword: op.password, newPassword: 'whatever-long' } })).status,
    401,
  );
  t.is((await login(op.identifier, op.password)).body.error, 'account_locked');
});

test.serial('a deactivated operator: refused at once with its token, at sign-in with the right password; the row stays', async (t) => {
  const api = client(h.url);
  const op = await activeOperatorAccount(h, admin.token, { role: 'administrator' });
  const s = await login(op.identifier, op.password);
  t.is((await api.get(`/operators/${admin.operatorId}/sessions`, { token: s.body.accessToken })).status, 200);

  const del = await api.delete(`/operators/${op.operatorId}`, { token: admin.token });
  t.is(del.status, 200);
  t.is(del.body.operator.status, 'deactivated');
  t.is(del.body.operator.id, op.operatorId);
  noHash(t, del.text);

  const refused = await api.get(`/operators/${admin.operatorId}/sessions`, { token: s.body.accessToken });
  t.is(refused.status, 403);
  t.is(refused.body.error, 'operator_deactivated');
  const signIn = await login(op.identifier, op.password);
  t.is(signIn.status, 403);
  t.is(signIn.body.error, 'operator_deactivated');
  const wrong = await login(op.identifier, 'not-the-password');
  t.is(wrong.status, 401, 'without the password, nothing is revealed');
  t.is(wrong.body.error, 'invalid_credentials');

  t.truthy(await h.deps.db('operators').where({ id: op.operatorId }).first(), 'no hard delete');
  const audit = await auditOf(op.operatorId, 'operator.deactivated');
  t.is(audit.length, 1);
  t.deepEqual([audit[0].data.from, audit[0].data.to], ['active', 'deactivated']);
  t.is((await api.delete(`/operators/${op.operatorId}`, { token: admin.token })).status, 200, 'deactivating again is harmless');
  t.is((await auditOf(op.operatorId, 'operator.deactivated')).length, 1);

  // Reactivation: sign-in works again, the old sessions stay ended.
  const back = await api.patch(`/operators/${op.operatorId}`, { token: admin.token, json: { status: 'active' } });
  t.is(back.status, 200);
  t.is(back.body.operator.status, 'active');
  t.is((await api.get(`/operators/${admin.operatorId}/sessions`, { token: s.body.accessToken })).status, 401);
  t.is((await login(op.identifier, op.password)).status, 200);
});

test.serial('PATCH /operators/{id} changes display name and role (audited); the body is strict and not empty', async (t) => {
  const api = client(h.url);
  const op = await activeOperatorAccount(h, admin.token);
  const s = await login(op.identifier, op.password);
  const asOperator = await api.get(`/operators/${admin.operatorId}/sessions`, { token: s.body.accessToken });
  t.is(asOperator.status, 403);
  t.is(asOperator.body.error, 'forbidden');

  const renamed = await api.patch(`/operators/${op.operatorId}`, { token: admin.token, json: { displayName: 'Renamed' } });
  t.is(renamed.status, 200);
  t.is(renamed.body.operator.displayName, 'Renamed');
  noHash(t, renamed.text);

  const promoted = await api.patch(`/operators/${op.operatorId}`, { token: admin.token, json: { role: 'administrator' } });
  t.is(promoted.status, 200);
  t.is(promoted.body.operator.role, 'administrator');
  t.is((await api.get(`/operators/${admin.operatorId}/sessions`, { token: s.body.accessToken })).status, 200, 'takes effect on the next request');
  const audit = await auditOf(op.operatorId, 'operator.role_changed');
  t.is(audit.length, 1);
  t.deepEqual([audit[0].data.from, audit[0].data.to, audit[0].actorId], ['operator', 'administrator', admin.operatorId]);

  const demoted = await api.patch(`/operators/${op.operatorId}`, { token: admin.token, json: { role: 'operator' } });
  t.is(demoted.status, 200);
  t.is((await api.get(`/operators/${admin.operatorId}/sessions`, { token: s.body.accessToken })).status, 403);

  for (const json of [
    {},
    { identifier: 'x' },
    { role: 'root' },
    { status: 'gone' },
    { displayName: '' },
    { mustResetPassword: false },
    { displayName: 'ok', passwordHash: 'x' },
  ]) {
    const res = await api.patch(`/operators/${op.operatorId}`, { token: admin.token, json });
    t.is(res.status, 400, JSON.stringify(json));
    t.is(res.body.error, 'validation_failed');
  }
});

test.serial('unknown operator ids are 404 not_found on every operator route', async (t) => {
  const api = client(h.url);
  for (const id of [randomUUID(), 'not-a-uuid', '123']) {
    const answers = await Promise.all([
      api.post(`/operators/${id}/reset-password`, { token: admin.token }),
      api.patch(`/operators/${id}`, { token: admin.token, json: { displayName: 'x' } }),
      api.delete(`/operators/${id}`, { token: admin.token }),
      api.get(`/operators/${id}/sessions`, { token: admin.token }),
    ]);
    for (const res of answers) {
      t.is(res.status, 404, id);
      t.is(res.body.error, 'not_found');
    }
  }
});

test.serial('GET /operators/{id}/sessions: full /identify SearchLog rows of that operator, newest first, paged', async (t) => {
  const api = client(h.url);
  const op = await newOperator(h);
  const other = await newOperator(h);
  const consumer = await newConsumer(h);
  const base = Date.now() - 60_000;
  const row = (i: number, extra: Record<string, unknown> = {}) => ({
    kind: 'identify',
    operatorId: op.operatorId,
    orgId: 'default',
    outcome: i % 2 ? 'match' : 'no_match',
    candidates: JSON.stringify(i % 2 ? [{ userId: consumer.userId, score: 0.81, rank: 1 }] : []),
    matchedUserIds: i % 2 ? [consumer.userId] : [],
    topScore: i % 2 ? 0.81 : null,
    latencyMs: JSON.stringify({ liveness: 10 + i, embed: 20, search: 3, total: 40 + i }),
    engineVersion: 'test-engine',
    createdAt: new Date(base + i * 1000),
    ...extra,
  });
  const inserted = await h.deps
    .db('search_logs')
    .insert([row(0), row(1, { escalatedAt: new Date(base + 5000), escalatedBy: op.operatorId }), row(2)])
    .returning('id');
  await h.deps.db('search_logs').insert([
    { ...row(3), operatorId: other.operatorId },
    {
      kind: 'verify_self',
      userId: consumer.userId,
      outcome: 'match',
      latencyMs: JSON.stringify({ liveness: 1, embed: 1, search: 1, total: 3 }),
      operatorId: op.operatorId,
    },
  ]);

  const p1 = await api.get(`/operators/${op.operatorId}/sessions?page=1&pageSize=2`, { token: admin.token });
  t.is(p1.status, 200);
  t.is(p1.body.total, 3);
  t.is(p1.body.page, 1);
  t.is(p1.body.pageSize, 2);
  t.deepEqual(
    p1.body.items.map((x: { id: string }) => x.id),
    [inserted[2].id, inserted[1].id],
  );
  const escalated = p1.body.items[1];
  t.is(escalated.referenceId, inserted[1].id);
  t.is(escalated.kind, 'identify');
  t.is(escalated.operatorId, op.operatorId);
  t.is(escalated.outcome, 'match');
  t.deepEqual(escalated.candidates, [{ userId: consumer.userId, score: 0.81, rank: 1 }]);
  t.deepEqual(escalated.matchedUserIds, [consumer.userId]);
  t.deepEqual(escalated.latencyMs, { liveness: 11, embed: 20, search: 3, total: 41 });
  t.is(escalated.escalatedAt, new Date(base + 5000).toISOString());
  t.is(escalated.escalatedBy, op.operatorId);
  t.is(escalated.engineVersion, 'test-engine');
  t.is(typeof escalated.createdAt, 'string');
  t.is(p1.body.items[0].escalatedAt, null);

  const p2 = await api.get(`/operators/${op.operatorId}/sessions?page=2&pageSize=2`, { token: admin.token });
  t.deepEqual(
    p2.body.items.map((x: { id: string }) => x.id),
    [inserted[0].id],
  );
  const defaults = await api.get(`/operators/${op.operatorId}/sessions`, { token: admin.token });
  t.is(defaults.body.page, 1);
  t.is(defaults.body.pageSize, 20);
  t.is(defaults.body.items.length, 3);

  for (const q of ['pageSize=101', 'page=0', 'page=x', 'sort=asc']) {
    const res = await api.get(`/operators/${op.operatorId}/sessions?${q}`, { token: admin.token });
    t.is(res.status, 400, q);
    t.is(res.body.error, 'validation_failed');
  }

  // The history outlives deactivation.
  await api.delete(`/operators/${op.operatorId}`, { token: admin.token });
  t.is((await api.get(`/operators/${op.operatorId}/sessions`, { token: admin.token })).body.total, 3);
});

test.serial('first administrator from ADMIN_IDENTIFIER/ADMIN_PASSWORD, then the last active administrator cannot be demoted or deactivated', async (t) => {
  // A deployment of its own: no operator exists yet.
  const fresh = await startHarness({ env: { ADMIN_IDENTIFIER: 'root-admin', ADMIN_PASSWORD: 'first admin passphrase' } });
  try {
    const api = client(fresh.url);
    const created = await ensureFirstAdministrator(fresh.deps);
    t.true(created.created);
    t.deepEqual(await ensureFirstAdministrator(fresh.deps), { created: false, reason: 'administrator_exists' });
    t.is((await fresh.deps.db('operators')).length, 1);

    const s = await api.post('/auth/operator/login', { json: { identifier: 'root-admin', password: 'first admin passphrase' } });
    t.is(s.status, 200);
    t.is(s.body.mustResetPassword, false, 'the password came from the environment');
    const token = s.body.accessToken;
    const id = s.body.operatorId;
    t.is((await fresh.deps.db('audit_events').where({ type: 'operator.created', subjectId: id })).length, 1);

    for (const [method, json] of [
      ['patch', { role: 'operator' }],
      ['patch', { status: 'deactivated' }],
      ['delete', undefined],
    ] as const) {
      const res = method === 'patch' ? await api.patch(`/operators/${id}`, { token, json }) : await api.delete(`/operators/${id}`, { token });
      t.is(res.status, 409, `${method} ${JSON.stringify(json)}`);
      t.is(res.body.error, 'conflict');
    }
    t.is((await api.patch(`/operators/${id}`, { token, json: { displayName: 'Root' } })).status, 200, 'other changes are fine');

    // With a second active administrator, the first may step down.
    const second = await api.post('/operators', { token, json: { identifier: 'second-admin', displayName: 'Second', role: 'administrator' } });
    t.is(second.status, 201);
    // A locked administrator cannot manage anything: it does not count.
    await fresh.deps.db('operators').where({ id: second.body.operator.id }).update({ lockedAt: new Date() });
    t.is((await api.patch(`/operators/${id}`, { token, json: { role: 'operator' } })).status, 409);
    await fresh.deps.db('operators').where({ id: second.body.operator.id }).update({ lockedAt: null });
    const down = await api.patch(`/operators/${id}`, { token, json: { role: 'operator' } });
    t.is(down.status, 200);
    t.is(down.body.operator.role, 'operator');
    // Now the second one is the last.
    const s2 = await api.post('/auth/operator/login', { json: { identifier: 'second-admin', password: second.body.temporaryPassword } });
    await api.post('/auth/operator/set-password', {
      token: s2.body.accessToken,
      json: { currentPassword: second.body.temporaryPassword, newPassword: 'second admin passphrase' },
    });
    t.is((await api.delete(`/operators/${second.body.operator.id}`, { token: s2.body.accessToken })).status, 409);
    // Two concurrent demotions of two administrators: at most one succeeds.
    t.is((await api.patch(`/operators/${id}`, { token: s2.body.accessToken, json: { role: 'administrator' } })).status, 200);
    const both = await Promise.all([
      api.patch(`/operators/${id}`, { token: s2.body.accessToken, json: { role: 'operator' } }),
      api.patch(`/operators/${second.body.operator.id}`, { token, json: { role: 'operator' } }),
    ]);
    // The refused one is 409 (it would remove the last administrator) or, when it is checked after the
    // other committed, 403 (its caller is no longer an administrator): both refuse it.
    const [ok, refused] = both.map((r) => r.status).sort();
    t.is(ok, 200);
    t.true(refused === 409 || refused === 403, `the other is refused (got ${refused})`);
    const admins = await fresh.deps.db('operators').where({ role: 'administrator', status: 'active' });
    t.is(admins.length, 1);
  } finally {
    await fresh.stop();
  }
});

test.serial('ensureFirstAdministrator does nothing when unset, or when an active administrator exists', async (t) => {
  t.deepEqual(await ensureFirstAdministrator(h.deps), { created: false, reason: 'not_configured' });
  const deps = { ...h.deps, config: h.configFor({ ADMIN_IDENTIFIER: uniqueIdentifier('boot'), ADMIN_PASSWORD: 'long enough password' }) };
  t.deepEqual(await ensureFirstAdministrator(deps), { created: false, reason: 'administrator_exists' });
});

test.serial('npm run create-admin creates the database if needed and prints a temporary password; a taken identifier exits non-zero', async (t) => {
  const name = `faceid_t_${randomBytes(5).toString('hex')}`;
  const url = new URL(h.db.url);
  url.pathname = `/${name}`;
  const env = { ...process.env, DATABASE_URL: url.toString(), NODE_ENV: 'test', LOG_LEVEL: 'silent', ADMIN_IDENTIFIER: '', ADMIN_PASSWORD: '' };
  const run = (...args: string[]) =>
    spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts', 'create-admin.ts'), ...args], {
      cwd: ROOT,
      env,
      encoding: 'utf8',
      timeout: 60_000,
    });
  const admin2 = knexFactory({ client: 'pg', connection: { connectionString: new URL('/postgres', h.db.url).toString() }, pool: { min: 0, max: 1 } });
  try {
    const first = run('ops-chief', 'Chief', 'Of', 'Ops');
    t.is(first.status, 0, first.stderr);
    const password = first.stdout.trim().split('\n').pop()!;
    t.regex(password, /^[A-Za-z0-9_-]{16}$/);

    const db = createDb(url.toString(), 1);
    try {
      const row = await db('operators').where({ identifier: 'ops-chief' }).first();
      t.is(row.role, 'administrator');
      t.is(row.mustResetPassword, true);
      t.is(row.displayName, 'Chief Of Ops');
      t.true(await verifyPassword(password, row.passwordHash));
    } finally {
      await db.destroy();
    }

    const again = run('OPS-chief');
    t.not(again.status, 0);
    t.regex(again.stderr, /already taken/);
    t.not(run().status, 0, 'usage');
  } finally {
    await admin2.raw(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await admin2.destroy();
  }
});

test.serial('operator sign-in attempts are capped per client address, before any password is checked', async (t) => {
  const limited = await startHarness({ env: { OPERATOR_LOGINS_PER_IP_PER_HOUR: '3', ADMIN_IDENTIFIER: 'root-limit', ADMIN_PASSWORD: 'root-limit-pass-1' } });
  try {
    await ensureFirstAdministrator(limited.deps);
    const api = client(limited.url);
    const login = (password: string) => api.post('/auth/operator/login', { json: { identifier: 'root-limit', password } });
    t.is((await login('wrong-1')).status, 401);
    t.is((await login('wrong-2')).status, 401);
    t.is((await login('root-limit-pass-1')).status, 200);
    const over = await login('root-limit-pass-1');
    t.is(over.status, 429, 'even the right password, once the address is over its limit');
    t.is(over.body.error, 'rate_limited');
    t.true(Number(over.headers.get('retry-after')) > 0);
  } finally {
    await limited.stop();
  }
});
