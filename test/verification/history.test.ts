/**
 * GET /users/{id}/history and its CSV export: every /identify that matched the user and every
 * /verify/self the user ran (SearchLog rows inserted where those routes write them), newest first,
 * with the user's own score and the disputed flag; the export streams one row per entry and
 * neutralises cells that would start a spreadsheet formula.
 */
import test from 'ava';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer, newOperator } from '../helpers/principals.js';
import { identifyRow, insertLogs, parseCsv, verifySelfRow } from '../support/search-logs.js';

const h = useHarness(test);

const api = () => client(h.url);
const at = (minutesAgo: number) => new Date(Date.now() - minutesAgo * 60_000);

async function scenario() {
  const me = await newConsumer(h);
  const other = await newConsumer(h);
  const op = await newOperator(h);
  const rows = [
    // 0: matched both; the other user ranks first. My score is my candidate score, 0.61.
    identifyRow({
      operatorId: op.operatorId,
      candidates: [
        { userId: other.userId, score: 0.83 },
        { userId: me.userId, score: 0.61 },
      ],
      createdAt: at(50),
    }),
    // 1: my own /verify/self, no match.
    verifySelfRow({ userId: me.userId, outcome: 'no_match', score: 0.21, createdAt: at(40) }),
    // 2: matched only the other user: not mine.
    identifyRow({ operatorId: op.operatorId, candidates: [{ userId: other.userId, score: 0.9 }], createdAt: at(30) }),
    // 3: the other user's /verify/self: not mine.
    verifySelfRow({ userId: other.userId, createdAt: at(20) }),
    // 4: an /identify that matched nobody: not mine.
    identifyRow({ operatorId: op.operatorId, outcome: 'no_face', createdAt: at(15) }),
    // 5: matched me alone.
    identifyRow({ operatorId: op.operatorId, candidates: [{ userId: me.userId, score: 0.77 }], createdAt: at(10) }),
    // 6: my own /verify/self, a match.
    verifySelfRow({ userId: me.userId, outcome: 'match', score: 0.88, createdAt: at(5) }),
  ];
  const ids = await insertLogs(h.deps.db, rows);
  return { me, other, op, ids };
}

test('history lists the identifies that matched me and my verify/self runs, newest first, with my own score', async (t) => {
  const { me, ids } = await scenario();
  const res = await api().get(`/users/${me.userId}/history`, { token: me.token });
  t.is(res.status, 200);
  t.is(res.body.page, 1);
  t.is(res.body.pageSize, 20);
  t.is(res.body.total, 4);
  t.deepEqual(
    res.body.items.map((i: { referenceId: string }) => i.referenceId),
    [ids[6], ids[5], ids[1], ids[0]],
  );
  const [v2, id5, v1, id0] = res.body.items;
  t.deepEqual(Object.keys(v2).sort(), ['createdAt', 'disputed', 'kind', 'outcome', 'referenceId', 'score']);
  t.like(v2, { kind: 'verify_self', outcome: 'match', disputed: false });
  t.like(id5, { kind: 'identify', outcome: 'match' });
  t.like(v1, { kind: 'verify_self', outcome: 'no_match' });
  t.like(id0, { kind: 'identify', outcome: 'match' });
  // Scores come back as stored, without the noise of widening a single-precision column.
  t.is(v2.score, 0.88);
  t.is(id5.score, 0.77);
  // SPEC 12.1: a failed comparison's score is never answered (also not later, in the history).
  t.is(v1.score, null);
  t.is(id0.score, 0.61, "my candidate score, not the best candidate's");
  t.true(Date.parse(v2.createdAt) > Date.parse(id0.createdAt));
});

test('history pages with page/pageSize (max 100) and shows disputed entries', async (t) => {
  const { me, ids } = await scenario();
  const p1 = await api().get(`/users/${me.userId}/history?page=1&pageSize=3`, { token: me.token });
  const p2 = await api().get(`/users/${me.userId}/history?page=2&pageSize=3`, { token: me.token });
  t.deepEqual([p1.body.items.length, p2.body.items.length], [3, 1]);
  t.is(p2.body.total, 4);
  t.is(p2.body.items[0].referenceId, ids[0]);
  t.deepEqual((await api().get(`/users/${me.userId}/history?page=9`, { token: me.token })).body.items, []);
  t.is((await api().get(`/users/${me.userId}/history?pageSize=100`, { token: me.token })).status, 200);
  for (const q of ['pageSize=101', 'pageSize=0', 'page=0', 'page=x', 'sort=asc']) {
    const bad = await api().get(`/users/${me.userId}/history?${q}`, { token: me.token });
    t.is(bad.status, 400, q);
    t.is(bad.body.error, 'validation_failed');
  }

  const disputed = await api().post('/disputes', { token: me.token, json: { referenceId: ids[5] } });
  t.is(disputed.status, 201);
  const after = await api().get(`/users/${me.userId}/history`, { token: me.token });
  t.deepEqual(
    after.body.items.map((i: { disputed: boolean }) => i.disputed),
    [false, true, false, false],
  );
});

test("history is the subject's own: another consumer gets 403, an operator 401", async (t) => {
  const { me, other, op } = await scenario();
  const foreign = await api().get(`/users/${other.userId}/history`, { token: me.token });
  t.is(foreign.status, 403);
  t.is(foreign.body.error, 'forbidden');
  t.is((await api().get(`/users/${me.userId}/history/export`, { token: other.token })).status, 403);
  t.is((await api().get(`/users/${me.userId}/history`, { token: op.token })).status, 401);
  t.is((await api().get(`/users/${me.userId}/history/export`)).status, 401);
});

test('the CSV export: an attachment with one row per history entry and formula cells neutralised', async (t) => {
  const { me, op, ids } = await scenario();
  const hostile = await insertLogs(h.deps.db, [
    verifySelfRow({ userId: me.userId, outcome: '=HYPERLINK("http://evil.example","x")', createdAt: at(3) }),
    verifySelfRow({ userId: me.userId, outcome: '@SUM(1+1)', createdAt: at(2) }),
    identifyRow({ operatorId: op.operatorId, outcome: '+cmd', candidates: [{ userId: me.userId, score: 0.7 }], createdAt: at(1) }),
    verifySelfRow({ userId: me.userId, outcome: '-2+3', createdAt: at(0.5) }),
    verifySelfRow({ userId: me.userId, outcome: '\tTAB', createdAt: at(0.4) }),
    verifySelfRow({ userId: me.userId, outcome: '\rCR', createdAt: at(0.3) }),
  ]);
  const res = await api().get(`/users/${me.userId}/history/export`, { token: me.token });
  t.is(res.status, 200);
  t.regex(res.headers.get('content-type') ?? '', /^text\/csv/);
  t.is(res.headers.get('content-disposition'), `attachment; filename="history-${me.userId}.csv"`);
  const rows = parseCsv(res.text).filter((r) => r.length > 1 || r[0] !== '');
  t.deepEqual(rows[0], ['referenceId', 'kind', 'outcome', 'score', 'createdAt', 'disputed']);
  const body = rows.slice(1);
  t.is(body.length, 4 + hostile.length, 'one row per history entry');
  const json = await api().get(`/users/${me.userId}/history?pageSize=100`, { token: me.token });
  t.deepEqual(
    body.map((r) => r[0]),
    json.body.items.map((i: { referenceId: string }) => i.referenceId),
    'the same entries in the same order',
  );
  const outcomeOf = (id: string) => body.find((r) => r[0] === id)![2];
  t.is(outcomeOf(hostile[0]!), '\'=HYPERLINK("http://evil.example","x")');
  t.is(outcomeOf(hostile[1]!), "'@SUM(1+1)");
  t.is(outcomeOf(hostile[2]!), "'+cmd");
  t.is(outcomeOf(hostile[3]!), "'-2+3");
  t.is(outcomeOf(hostile[4]!), "'\tTAB");
  t.is(outcomeOf(hostile[5]!), "'\rCR");
  t.is(outcomeOf(ids[6]!), 'match', 'ordinary cells are left alone');
  const identify5 = body.find((r) => r[0] === ids[5])!;
  t.is(identify5[1], 'identify');
  t.is(Math.round(Number(identify5[3]) * 100), 77);
  t.is(identify5[5], 'false');
  t.false(
    body.some((r) => r.some((c) => /^[=+\-@\t\r]/.test(c))),
    'no cell starts a formula',
  );
});

test('the export streams a long history completely (keyset batches, ties on createdAt)', async (t) => {
  const me = await newConsumer(h);
  const sameInstant = at(60);
  const rows = Array.from({ length: 1203 }, (_, i) =>
    verifySelfRow({ userId: me.userId, outcome: i % 2 ? 'match' : 'no_match', createdAt: i < 700 ? sameInstant : undefined }),
  );
  const ids = await insertLogs(h.deps.db, rows);
  const res = await api().get(`/users/${me.userId}/history/export`, { token: me.token });
  t.is(res.status, 200);
  const body = parseCsv(res.text)
    .slice(1)
    .filter((r) => r.length > 1);
  t.is(body.length, 1203);
  t.deepEqual(body.map((r) => r[0]).sort(), [...ids].sort());
  const page = await api().get(`/users/${me.userId}/history?pageSize=100&page=13`, { token: me.token });
  t.is(page.body.total, 1203);
  t.is(page.body.items.length, 3);
});

test('an empty history is an empty page and a header-only CSV', async (t) => {
  const me = await newConsumer(h);
  const res = await api().get(`/users/${me.userId}/history`, { token: me.token });
  t.deepEqual(res.body, { items: [], page: 1, pageSize: 20, total: 0 });
  const csv = await api().get(`/users/${me.userId}/history/export`, { token: me.token });
  t.is(csv.status, 200);
  t.deepEqual(
    parseCsv(csv.text).filter((r) => r.length > 1),
    [['referenceId', 'kind', 'outcome', 'score', 'createdAt', 'disputed']],
  );
});
