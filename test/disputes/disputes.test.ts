/**
 * Disputes: a consumer disputes only an entry that matched them or their own /verify/self; the
 * administrators list them with filters and move them open → investigating → resolved | rejected.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer, newOperator } from '../helpers/principals.js';
import { identifyRow, insertLogs, verifySelfRow } from '../support/search-logs.js';

const h = useHarness(test);

const api = () => client(h.url);

async function world() {
  const me = await newConsumer(h);
  const other = await newConsumer(h);
  const op = await newOperator(h);
  const admin = await newOperator(h, { role: 'administrator' });
  const [matchedMe, matchedOther, mySelf, otherSelf, matchedBoth] = await insertLogs(h.deps.db, [
    identifyRow({ operatorId: op.operatorId, candidates: [{ userId: me.userId, score: 0.8 }] }),
    identifyRow({ operatorId: op.operatorId, candidates: [{ userId: other.userId, score: 0.8 }] }),
    verifySelfRow({ userId: me.userId, outcome: 'no_match', score: 0.2 }),
    verifySelfRow({ userId: other.userId }),
    identifyRow({
      operatorId: op.operatorId,
      candidates: [
        { userId: other.userId, score: 0.9 },
        { userId: me.userId, score: 0.7 },
      ],
    }),
  ]);
  return {
    me,
    other,
    op,
    admin,
    refs: { matchedMe: matchedMe!, matchedOther: matchedOther!, mySelf: mySelf!, otherSelf: otherSelf!, matchedBoth: matchedBoth! },
  };
}

test('a consumer disputes an identify that matched them and their own verify/self: 201, open, audited', async (t) => {
  const { me, refs } = await world();
  const res = await api().post('/disputes', { token: me.token, json: { referenceId: refs.matchedMe, reason: 'That was not me at the branch.' } });
  t.is(res.status, 201);
  t.like(res.body.dispute, {
    referenceId: refs.matchedMe,
    userId: me.userId,
    kind: 'identify',
    status: 'open',
    reason: 'That was not me at the branch.',
    note: null,
  });
  t.truthy(res.body.dispute.id);
  t.truthy(Date.parse(res.body.dispute.createdAt));
  const self = await api().post('/disputes', { token: me.token, json: { referenceId: refs.mySelf } });
  t.is(self.status, 201);
  t.like(self.body.dispute, { kind: 'verify_self', reason: null });
  const both = await api().post('/disputes', { token: me.token, json: { referenceId: refs.matchedBoth } });
  t.is(both.status, 201, 'matched among several candidates counts');
  const audit = await h.deps.db('auditEvents').where({ type: 'dispute.created', subjectId: res.body.dispute.id }).first();
  t.like(audit, { actorType: 'consumer', actorId: me.userId });
});

test("a consumer cannot dispute another's entry (403), an unknown one (404), or the same one twice (409)", async (t) => {
  const { me, other, refs } = await world();
  for (const ref of [refs.matchedOther, refs.otherSelf]) {
    const res = await api().post('/disputes', { token: me.token, json: { referenceId: ref } });
    t.is(res.status, 403);
    t.is(res.body.error, 'forbidden');
  }
  for (const ref of [randomUUID(), 'no-such-entry']) {
    const res = await api().post('/disputes', { token: me.token, json: { referenceId: ref } });
    t.is(res.status, 404);
    t.is(res.body.error, 'not_found');
  }
  t.is((await api().post('/disputes', { token: me.token, json: { referenceId: refs.matchedMe } })).status, 201);
  const again = await api().post('/disputes', { token: me.token, json: { referenceId: refs.matchedMe, reason: 'again' } });
  t.is(again.status, 409);
  t.is(again.body.error, 'conflict');
  // The other matched user may dispute the shared entry on their own account.
  t.is((await api().post('/disputes', { token: other.token, json: { referenceId: refs.matchedBoth } })).status, 201);
  t.is((await api().post('/disputes', { token: me.token, json: { referenceId: refs.matchedBoth } })).status, 201);
  t.is(
    await h.deps
      .db('disputes')
      .where({ userId: me.userId })
      .count({ n: '*' })
      .then((r) => Number(r[0]!.n)),
    2,
  );
});

test('POST /disputes validates strictly: reason at most 2000 characters, no other keys; consumers only', async (t) => {
  const { me, op, admin, refs } = await world();
  const long = await api().post('/disputes', { token: me.token, json: { referenceId: refs.matchedMe, reason: 'x'.repeat(2001) } });
  t.is(long.status, 400);
  t.is(long.body.error, 'validation_failed');
  for (const json of [{}, { referenceId: refs.matchedMe, status: 'resolved' }, { referenceId: 42 }]) {
    t.is((await api().post('/disputes', { token: me.token, json })).status, 400, JSON.stringify(json));
  }
  t.is((await api().post('/disputes', { token: op.token, json: { referenceId: refs.matchedMe } })).status, 401);
  t.is((await api().post('/disputes', { token: admin.token, json: { referenceId: refs.matchedMe } })).status, 401);
  t.is((await api().post('/disputes', { json: { referenceId: refs.matchedMe } })).status, 401);
  const max = await api().post('/disputes', { token: me.token, json: { referenceId: refs.matchedMe, reason: 'y'.repeat(2000) } });
  t.is(max.status, 201);
  t.is(max.body.dispute.reason.length, 2000);
});

test('GET /disputes: administrators only, with filters and paging', async (t) => {
  const { me, other, op, admin, refs } = await world();
  const d1 = (await api().post('/disputes', { token: me.token, json: { referenceId: refs.matchedMe } })).body.dispute;
  const d2 = (await api().post('/disputes', { token: me.token, json: { referenceId: refs.mySelf } })).body.dispute;
  const d3 = (await api().post('/disputes', { token: other.token, json: { referenceId: refs.otherSelf } })).body.dispute;
  await api().patch(`/disputes/${d2.id}`, { token: admin.token, json: { status: 'investigating' } });

  t.is((await api().get('/disputes', { token: op.token })).status, 403);
  t.is((await api().get('/disputes', { token: me.token })).status, 401);

  const mine = await api().get(`/disputes?userId=${me.userId}`, { token: admin.token });
  t.is(mine.status, 200);
  t.is(mine.body.total, 2);
  t.deepEqual(mine.body.items.map((d: { id: string }) => d.id).sort(), [d1.id, d2.id].sort());
  const investigating = await api().get(`/disputes?status=investigating&userId=${me.userId}`, { token: admin.token });
  t.deepEqual(
    investigating.body.items.map((d: { id: string }) => d.id),
    [d2.id],
  );
  const byRef = await api().get(`/disputes?referenceId=${refs.otherSelf}`, { token: admin.token });
  t.deepEqual(
    byRef.body.items.map((d: { id: string }) => d.id),
    [d3.id],
  );

  const all = await api().get('/disputes?page=1&pageSize=2', { token: admin.token });
  t.is(all.body.page, 1);
  t.is(all.body.pageSize, 2);
  t.is(all.body.items.length, 2);
  t.true(all.body.total >= 3);
  const defaults = await api().get('/disputes', { token: admin.token });
  t.is(defaults.body.page, 1);
  t.is(defaults.body.pageSize, 20);

  const today = new Date().toISOString().slice(0, 10);
  const inRange = await api().get(`/disputes?userId=${me.userId}&from=${today}&to=${today}`, { token: admin.token });
  t.is(inRange.body.total, 2);
  const future = await api().get(`/disputes?userId=${me.userId}&from=2999-01-01`, { token: admin.token });
  t.is(future.body.total, 0);
  const past = await api().get(`/disputes?userId=${me.userId}&to=2000-01-01T00:00:00Z`, { token: admin.token });
  t.is(past.body.total, 0);
  for (const q of ['status=closed', 'userId=nope', 'from=yesterday', 'from=2026-02-02&to=2026-02-01', 'pageSize=101', 'color=red']) {
    const bad = await api().get(`/disputes?${q}`, { token: admin.token });
    t.is(bad.status, 400, q);
    t.is(bad.body.error, 'validation_failed');
  }
});

test('PATCH /disputes/{id}: open → investigating → resolved | rejected; every other move is 409', async (t) => {
  const { me, op, admin, refs } = await world();
  const a = (await api().post('/disputes', { token: me.token, json: { referenceId: refs.matchedMe } })).body.dispute;
  const b = (await api().post('/disputes', { token: me.token, json: { referenceId: refs.mySelf } })).body.dispute;
  const move = (id: string, status: string, note?: string) =>
    api().patch(`/disputes/${id}`, { token: admin.token, json: { status, ...(note ? { note } : {}) } });

  for (const status of ['resolved', 'rejected', 'open']) {
    const res = await move(a.id, status);
    t.is(res.status, 409, `open → ${status}`);
    t.is(res.body.error, 'conflict');
  }
  const inv = await move(a.id, 'investigating', 'Pulling the branch footage.');
  t.is(inv.status, 200);
  t.like(inv.body.dispute, { id: a.id, status: 'investigating', note: 'Pulling the branch footage.' });
  for (const status of ['open', 'investigating']) t.is((await move(a.id, status)).status, 409, `investigating → ${status}`);
  const resolved = await move(a.id, 'resolved', 'Confirmed: a different person.');
  t.is(resolved.status, 200);
  t.like(resolved.body.dispute, { status: 'resolved', note: 'Confirmed: a different person.' });
  for (const status of ['open', 'investigating', 'rejected', 'resolved']) t.is((await move(a.id, status)).status, 409, `resolved → ${status}`);

  t.is((await move(b.id, 'investigating')).status, 200);
  const rejected = await move(b.id, 'rejected');
  t.is(rejected.status, 200);
  t.like(rejected.body.dispute, { status: 'rejected', note: null });
  t.is((await move(b.id, 'resolved')).status, 409);

  const audits = await h.deps.db('auditEvents').where({ type: 'dispute.updated', subjectId: a.id }).orderBy('id');
  t.deepEqual(
    audits.map((e: { data: { from: string; to: string } }) => `${e.data.from}>${e.data.to}`),
    ['open>investigating', 'investigating>resolved'],
  );
  t.is(audits[0].actorId, admin.operatorId);

  t.is((await move(randomUUID(), 'investigating')).status, 404);
  t.is((await api().patch(`/disputes/${b.id}`, { token: admin.token, json: { status: 'closed' } })).status, 400);
  t.is((await api().patch(`/disputes/${b.id}`, { token: admin.token, json: { status: 'resolved', userId: me.userId } })).status, 400);
  t.is((await api().patch(`/disputes/${b.id}`, { token: op.token, json: { status: 'resolved' } })).status, 403);
  t.is((await api().patch(`/disputes/${b.id}`, { token: me.token, json: { status: 'resolved' } })).status, 401);
});

test('two administrators racing on one dispute: exactly one move wins', async (t) => {
  const { me, refs } = await world();
  const admins = await Promise.all([newOperator(h, { role: 'administrator' }), newOperator(h, { role: 'administrator' })]);
  const d = (await api().post('/disputes', { token: me.token, json: { referenceId: refs.matchedMe } })).body.dispute;
  const results = await Promise.all(
    Array.from({ length: 6 }, (_, i) => api().patch(`/disputes/${d.id}`, { token: admins[i % 2]!.token, json: { status: 'investigating' } })),
  );
  t.deepEqual(results.map((r) => r.status).sort(), [200, 409, 409, 409, 409, 409]);
  const audits = await h.deps.db('auditEvents').where({ type: 'dispute.updated', subjectId: d.id });
  t.is(audits.length, 1);
});
