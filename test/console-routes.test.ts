/** The routes added for the consoles: GET /operators (paging, filters), GET /operators/{id}, GET /audit-events, GET /identify/mine. Serial: the listings count every operator of the database. */
import test from 'ava';
import { createApiClient, type Api } from '../console/src/api/client.js';
import { startHarness, type Harness } from './helpers/harness.js';
import { newOperator } from './helpers/principals.js';

let h: Harness;
let admin: Api;
const ids: Record<string, string> = {};

test.before(async () => {
  h = await startHarness();
  const a = await newOperator(h, { role: 'administrator' });
  ids.admin = a.operatorId;
  admin = createApiClient(h.url, () => a.token);
  for (const [identifier, displayName, role] of [
    ['ngozi.eze', 'Ngozi Eze', 'operator'],
    ['tunde_b', 'Tunde Bakare', 'operator'],
    ['zainab', 'Zainab Musa', 'administrator'],
  ] as const) {
    const r = await admin.POST('/operators', { body: { identifier, displayName, role } });
    ids[identifier] = r.data!.operator.id;
  }
  await admin.DELETE('/operators/{id}', { params: { path: { id: ids['tunde_b']! } } });
});
test.after.always(async () => {
  await h?.stop();
});

test.serial('GET /operators pages newest first and never carries a password hash', async (t) => {
  const first = await admin.GET('/operators', { params: { query: { page: 1, pageSize: 2 } } });
  t.is(first.response.status, 200);
  t.like(first.data, { page: 1, pageSize: 2, total: 4 });
  t.deepEqual(
    first.data!.items.map((o) => o.identifier),
    ['zainab', 'tunde_b'],
  );
  const second = await admin.GET('/operators', { params: { query: { page: 2, pageSize: 2 } } });
  t.is(second.data!.items[0]!.identifier, 'ngozi.eze');
  t.is(second.data!.items.length, 2);
  t.false(JSON.stringify([first.data, second.data]).includes('passwordHash'));
});

test.serial('GET /operators filters by role, status and a substring of identifier or name (LIKE wildcards are literal)', async (t) => {
  const q = async (query: Record<string, string>) =>
    (await admin.GET('/operators', { params: { query: { page: 1, pageSize: 20, ...query } } })).data!.items.map((o) => o.identifier).sort();
  t.deepEqual(
    await q({ role: 'administrator' }),
    ['zainab', (await admin.GET('/operators/{id}', { params: { path: { id: ids.admin! } } })).data!.operator.identifier].sort(),
  );
  t.deepEqual(await q({ status: 'deactivated' }), ['tunde_b']);
  t.deepEqual(await q({ q: 'EZE' }), ['ngozi.eze']);
  t.deepEqual(await q({ q: 'bakare' }), ['tunde_b']);
  t.deepEqual(await q({ q: '_' }), ['tunde_b'], '_ matches only an underscore');
  t.deepEqual(await q({ q: '%' }), []);
  t.deepEqual(await q({ role: 'operator', status: 'active' }), ['ngozi.eze']);
  const bad = await admin.GET('/operators', { params: { query: { page: 1, pageSize: 20, role: 'boss' as 'operator' } } });
  t.is(bad.response.status, 400);
  t.is((bad.error as { error: string }).error, 'validation_failed');
});

test.serial('GET /operators/{id} answers the operator, 404 not_found for an unknown or malformed id', async (t) => {
  const one = await admin.GET('/operators/{id}', { params: { path: { id: ids['zainab']! } } });
  t.like(one.data!.operator, { identifier: 'zainab', displayName: 'Zainab Musa', role: 'administrator', status: 'active', mustResetPassword: true });
  t.false('passwordHash' in one.data!.operator);
  for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
    const missing = await admin.GET('/operators/{id}', { params: { path: { id } } });
    t.is(missing.response.status, 404);
    t.is((missing.error as { error: string }).error, 'not_found');
  }
});

test.serial('GET /audit-events lists newest first with filters by type, severity, actor, subject and dates', async (t) => {
  const all = await admin.GET('/audit-events', { params: { query: { page: 1, pageSize: 100 } } });
  t.is(all.response.status, 200);
  const types = all.data!.items.map((e) => e.type);
  t.deepEqual(types, ['operator.deactivated', 'operator.created', 'operator.created', 'operator.created']);
  t.true(all.data!.items.every((e) => e.actorId === ids.admin && e.actorType === 'operator'));

  const created = await admin.GET('/audit-events', { params: { query: { page: 1, pageSize: 2, type: 'operator.created' } } });
  t.like(created.data, { total: 3, page: 1, pageSize: 2 });
  t.is(created.data!.items.length, 2);
  const bySubject = await admin.GET('/audit-events', { params: { query: { page: 1, pageSize: 20, subjectId: ids['tunde_b']! } } });
  t.deepEqual(
    bySubject.data!.items.map((e) => e.type),
    ['operator.deactivated', 'operator.created'],
  );
  // A deactivation is logged at high severity; creations at info.
  const high = await admin.GET('/audit-events', { params: { query: { page: 1, pageSize: 20, severity: 'high' } } });
  t.deepEqual(
    high.data!.items.map((e) => [e.type, e.subjectId]),
    [['operator.deactivated', ids['tunde_b']]],
  );
  t.is((await admin.GET('/audit-events', { params: { query: { page: 1, pageSize: 20, severity: 'info' } } })).data!.total, 3);
  t.is((await admin.GET('/audit-events', { params: { query: { page: 1, pageSize: 20, actorId: '00000000-0000-4000-8000-000000000000' } } })).data!.total, 0);
  t.is((await admin.GET('/audit-events', { params: { query: { page: 1, pageSize: 20, to: '2000-01-01' } } })).data!.total, 0);
  const today = new Date().toISOString().slice(0, 10);
  t.is((await admin.GET('/audit-events', { params: { query: { page: 1, pageSize: 20, from: today, to: today } } })).data!.total, 4);
  const reversed = await admin.GET('/audit-events', { params: { query: { page: 1, pageSize: 20, from: '2030-01-02', to: '2030-01-01' } } });
  t.is(reversed.response.status, 400);
  // Nothing secret in the log's data: no temporary password leaks into an event.
  t.notRegex(JSON.stringify(all.data), /temporaryPassword|passwordHash/);
});

test.serial("GET /identify/mine lists only the caller's own /identify calls", async (t) => {
  const me = await newOperator(h);
  const other = await newOperator(h);
  const row = (operatorId: string, outcome: string) => ({
    kind: 'identify',
    operatorId,
    orgId: 'default',
    outcome,
    candidates: JSON.stringify([]),
    latencyMs: JSON.stringify({ liveness: 1, embed: 1, search: 1, total: 3 }),
  });
  await h.deps.db('searchLogs').insert([row(me.operatorId, 'no_match'), row(me.operatorId, 'no_face'), row(other.operatorId, 'match')]);
  const mine = await createApiClient(h.url, () => me.token).GET('/identify/mine', { params: { query: { page: 1, pageSize: 20 } } });
  t.is(mine.response.status, 200);
  t.is(mine.data!.total, 2);
  t.true(mine.data!.items.every((r) => r.operatorId === me.operatorId));
  t.deepEqual(mine.data!.items.map((r) => r.outcome).sort(), ['no_face', 'no_match']);
});
