/**
 * Administrators' reports: accuracy (outcome breakdowns per endpoint, disputed-match rate, labelled as
 * proxies), volume per day, and the billing report from a contracted-tier file and the org's usage.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { loadTiers } from '../../features/reports/billing-service.js';
import { loadConfig } from '../../processes/config.js';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer, newOperator } from '../helpers/principals.js';
import { identifyRow, insertLogs, verifySelfRow } from '../support/search-logs.js';

const TIERS = {
  tiers: {
    small: { includedVolume: 3, unitPrice: 10.5, overagePrice: 20.25, currency: 'NGN' },
    big: { includedVolume: 1000, unitPrice: 5, overagePrice: 8, currency: 'NGN' },
  },
  orgs: { default: 'big', acme: 'small', ghost: 'small' },
};

const h = useHarness(test, () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'faceid-tiers-'));
  const file = path.join(dir, 'tiers.json');
  writeFileSync(file, JSON.stringify(TIERS));
  return { env: { BILLING_TIERS_FILE: file } };
});

const api = () => client(h.url);
const day = (d: string, hour = 12) => new Date(`${d}T${String(hour).padStart(2, '0')}:00:00Z`);

/** March 2025: identify 4 match (2 disputed), 2 no_match, 1 liveness_failed, 1 no_face, 1 engine failure; verify_self 3 match (1 disputed), 1 no_match. */
async function march2025() {
  const op = await newOperator(h);
  const users = await Promise.all(Array.from({ length: 4 }, () => newConsumer(h)));
  const u = (i: number) => users[i]!;
  const ids = await insertLogs(h.deps.db, [
    identifyRow({
      operatorId: op.operatorId,
      candidates: [
        { userId: u(0).userId, score: 0.8 },
        { userId: u(3).userId, score: 0.7 },
      ],
      createdAt: day('2025-03-10', 9),
    }),
    identifyRow({ operatorId: op.operatorId, candidates: [{ userId: u(1).userId, score: 0.8 }], createdAt: day('2025-03-10', 10) }),
    identifyRow({ operatorId: op.operatorId, candidates: [{ userId: u(2).userId, score: 0.8 }], createdAt: day('2025-03-10', 11) }),
    identifyRow({ operatorId: op.operatorId, candidates: [{ userId: u(3).userId, score: 0.8 }], createdAt: day('2025-03-10', 23) }),
    identifyRow({ operatorId: op.operatorId, outcome: 'no_match', createdAt: day('2025-03-10', 0) }),
    identifyRow({ operatorId: op.operatorId, outcome: 'no_match', createdAt: day('2025-03-11') }),
    identifyRow({ operatorId: op.operatorId, outcome: 'liveness_failed', createdAt: day('2025-03-11') }),
    identifyRow({ operatorId: op.operatorId, outcome: 'no_face', createdAt: day('2025-03-11') }),
    identifyRow({ operatorId: op.operatorId, outcome: 'face_engine_unavailable', errorCode: 'face_engine_unavailable', createdAt: day('2025-03-11') }),
    verifySelfRow({ userId: u(0).userId, outcome: 'match', createdAt: day('2025-03-11') }),
    verifySelfRow({ userId: u(1).userId, outcome: 'match', createdAt: day('2025-03-11') }),
    verifySelfRow({ userId: u(2).userId, outcome: 'match', createdAt: day('2025-03-12') }),
    verifySelfRow({ userId: u(3).userId, outcome: 'no_match', createdAt: day('2025-03-12') }),
    // Outside the range.
    identifyRow({ operatorId: op.operatorId, candidates: [{ userId: u(0).userId, score: 0.8 }], createdAt: day('2025-02-01') }),
  ]);
  // Two identify matches and one verify_self match disputed (one of them twice: counted once).
  for (const [user, ref] of [
    [u(0), ids[0]],
    [u(3), ids[0]],
    [u(1), ids[1]],
    [u(0), ids[9]],
  ] as const) {
    const r = await api().post('/disputes', { token: user.token, json: { referenceId: ref } });
    if (r.status !== 201) throw new Error(`dispute: ${r.status} ${r.text}`);
  }
  return { op, users };
}

let seeded: Promise<unknown> | undefined;
const seedMarch = () => (seeded ??= march2025());

test('accuracy: outcome counts and rates per endpoint, the disputed-match rate, labelled as proxies', async (t) => {
  await seedMarch();
  const admin = await newOperator(h, { role: 'administrator' });
  const res = await api().get('/analytics/accuracy?from=2025-03-10&to=2025-03-12', { token: admin.token });
  t.is(res.status, 200);
  t.true(res.body.proxy);
  t.regex(res.body.label, /prox/i);
  t.regex(res.body.label, /not calibrated false-accept or false-reject/i);
  const { identify, verify_self: self } = res.body.endpoints;
  t.is(identify.total, 9);
  t.deepEqual(identify.outcomes.match, { count: 4, rate: 0.4444 });
  t.deepEqual(identify.outcomes.no_match, { count: 2, rate: 0.2222 });
  t.deepEqual(identify.outcomes.liveness_failed, { count: 1, rate: 0.1111 });
  t.deepEqual(identify.outcomes.no_face, { count: 1, rate: 0.1111 });
  t.deepEqual(identify.outcomes.face_engine_unavailable, { count: 1, rate: 0.1111 });
  t.is(identify.matchEntries, 4);
  t.is(identify.disputedMatchEntries, 2);
  t.is(identify.disputedMatchRate, 0.5);
  t.is(self.total, 4);
  t.deepEqual(self.outcomes.match, { count: 3, rate: 0.75 });
  t.deepEqual(self.outcomes.no_face, { count: 0, rate: 0 }, 'documented outcomes are listed even at zero');
  t.is(self.disputedMatchRate, 0.3333);
  t.is(res.body.disputedMatchRate, 0.4286);
  t.is(res.body.from, '2025-03-10');

  const narrower = await api().get('/analytics/accuracy?from=2025-03-11&to=2025-03-11', { token: admin.token });
  t.is(narrower.body.endpoints.identify.total, 4);
  t.is(narrower.body.endpoints.identify.disputedMatchRate, null, 'no match entries: no rate');
  t.is(narrower.body.endpoints.verify_self.total, 2);

  const allTime = await api().get('/analytics/accuracy', { token: admin.token });
  t.true(allTime.body.endpoints.identify.total >= 10, 'without a range, the February row counts too');
  t.is(allTime.body.from, null);
});

test('volume: calls per UTC day per endpoint with their outcomes, zero-filled over the range', async (t) => {
  await seedMarch();
  const admin = await newOperator(h, { role: 'administrator' });
  const res = await api().get('/analytics/volume?from=2025-03-09&to=2025-03-13', { token: admin.token });
  t.is(res.status, 200);
  t.is(res.body.timezone, 'UTC');
  t.deepEqual(
    res.body.days.map((d: { date: string }) => d.date),
    ['2025-03-09', '2025-03-10', '2025-03-11', '2025-03-12', '2025-03-13'],
  );
  const byDate = Object.fromEntries(res.body.days.map((d: { date: string }) => [d.date, d]));
  t.is(byDate['2025-03-09'].total, 0);
  t.is(byDate['2025-03-10'].identify.total, 5);
  t.is(byDate['2025-03-10'].identify.outcomes.match, 4);
  t.is(byDate['2025-03-10'].verify_self.total, 0);
  t.is(byDate['2025-03-11'].identify.total, 4);
  t.is(byDate['2025-03-11'].verify_self.total, 2);
  t.is(byDate['2025-03-12'].verify_self.outcomes.no_match, 1);
  t.is(byDate['2025-03-12'].total, 2);
  t.deepEqual(res.body.totals, { identify: 9, verify_self: 4, total: 13 });

  const dateTime = await api().get('/analytics/volume?from=2025-03-10T10:30:00Z&to=2025-03-10T23:59:59Z', { token: admin.token });
  t.is(dateTime.body.totals.identify, 2, 'date-times are instants');
});

test('analytics: administrators only; from after to, bad dates and unknown parameters are 400', async (t) => {
  const admin = await newOperator(h, { role: 'administrator' });
  const op = await newOperator(h);
  const consumer = await newConsumer(h);
  for (const p of ['/analytics/accuracy', '/analytics/volume']) {
    t.is((await api().get(p, { token: op.token })).status, 403);
    t.is((await api().get(p, { token: consumer.token })).status, 401);
    t.is((await api().get(p)).status, 401);
    for (const q of ['from=2025-03-12&to=2025-03-10', 'from=12/03/2025', 'to=2025-13-40', 'from=2025-03-10T10:00:00', 'bucket=week']) {
      const bad = await api().get(`${p}?${q}`, { token: admin.token });
      t.is(bad.status, 400, `${p}?${q}`);
      t.is(bad.body.error, 'validation_failed');
    }
    t.is((await api().get(`${p}?from=2025-03-10&to=2025-03-10`, { token: admin.token })).status, 200, 'a one-day range');
  }
});

test('billing: tier, period (default the current month), billable usage, overage and amount due', async (t) => {
  const admin = await newOperator(h, { role: 'administrator' });
  const a1 = await newOperator(h, { orgId: 'acme' });
  const a2 = await newOperator(h, { orgId: 'acme' });
  const other = await newOperator(h, { orgId: 'default' });
  const consumer = await newConsumer(h);
  const now = new Date();
  const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const lastMonth = new Date(monthStart.getTime() - 86_400_000);
  await insertLogs(h.deps.db, [
    identifyRow({ operatorId: a1.operatorId, orgId: 'acme', candidates: [{ userId: consumer.userId, score: 0.9 }] }),
    identifyRow({ operatorId: a1.operatorId, orgId: 'acme', outcome: 'no_match' }),
    identifyRow({ operatorId: a1.operatorId, orgId: 'acme', outcome: 'liveness_failed' }),
    identifyRow({ operatorId: a2.operatorId, orgId: 'acme', outcome: 'no_face' }),
    identifyRow({ operatorId: a2.operatorId, orgId: 'acme', outcome: 'no_match' }),
    // Logged without org: the operator's org is used.
    identifyRow({ operatorId: a2.operatorId, orgId: null, outcome: 'no_match' }),
    // A service failure: logged, not billed.
    identifyRow({ operatorId: a1.operatorId, orgId: 'acme', outcome: 'face_engine_unavailable', errorCode: 'face_engine_unavailable' }),
    // Last month, another org, and a consumer's /verify/self: not in this bill.
    identifyRow({ operatorId: a1.operatorId, orgId: 'acme', outcome: 'no_match', createdAt: lastMonth }),
    identifyRow({ operatorId: other.operatorId, orgId: 'default', outcome: 'no_match' }),
    verifySelfRow({ userId: consumer.userId }),
  ]);

  const res = await api().get('/billing/acme', { token: admin.token });
  t.is(res.status, 200);
  t.is(res.body.orgId, 'acme');
  t.deepEqual(res.body.tier, { name: 'small', includedVolume: 3, unitPrice: 10.5, overagePrice: 20.25, currency: 'NGN' });
  t.deepEqual(res.body.period, {
    from: monthStart.toISOString().slice(0, 10),
    to: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 0)).toISOString().slice(0, 10),
  });
  t.is(res.body.includedVolume, 3);
  t.is(res.body.usage.billable, 6);
  t.is(res.body.usage.notBilled, 1);
  t.is(res.body.usage.byOutcome.no_match, 3);
  t.is(res.body.usage.byOutcome.face_engine_unavailable, 1);
  t.regex(res.body.usage.definition, /attestation/);
  t.deepEqual(res.body.overage, { volume: 3, unitPrice: 20.25, amount: 60.75 });
  t.is(res.body.committedAmount, 31.5);
  t.is(res.body.amountDue, 92.25);
  t.is(res.body.currency, 'NGN');

  const withLastMonth = await api().get(`/billing/acme?from=${lastMonth.toISOString().slice(0, 10)}&to=${now.toISOString().slice(0, 10)}`, {
    token: admin.token,
  });
  t.is(withLastMonth.body.usage.billable, 7);
  t.is(withLastMonth.body.period.from, lastMonth.toISOString().slice(0, 10));

  const ghost = await api().get('/billing/ghost', { token: admin.token });
  t.is(ghost.status, 200);
  t.is(ghost.body.usage.billable, 0);
  t.deepEqual(ghost.body.overage, { volume: 0, unitPrice: 20.25, amount: 0 });
  t.is(ghost.body.amountDue, 31.5, 'the committed volume is due even unused');
  t.is((await api().get('/billing/default', { token: admin.token })).status, 200);
});

test("billing: an org absent from the tier file is 404; administrators only; the repo's file has `default`", async (t) => {
  const admin = await newOperator(h, { role: 'administrator' });
  const op = await newOperator(h, { orgId: 'acme' });
  const missing = await api().get('/billing/nobody', { token: admin.token });
  t.is(missing.status, 404);
  t.is(missing.body.error, 'not_found');
  t.is((await api().get('/billing/constructor', { token: admin.token })).status, 404, 'no prototype keys');
  t.is((await api().get('/billing/a%20b', { token: admin.token })).status, 400);
  t.is((await api().get('/billing/acme?from=2025-02-02&to=2025-02-01', { token: admin.token })).status, 400);
  t.is((await api().get('/billing/acme', { token: op.token })).status, 403);
  t.is((await api().get('/billing/acme')).status, 401);

  const repoFile = loadConfig({ NODE_ENV: 'development' }).billing.tiersFile;
  t.is(repoFile, 'config/billing-tiers.json');
  const tiers = await loadTiers(repoFile);
  t.truthy(tiers.orgs.default);
  t.truthy(tiers.tiers[tiers.orgs.default!]);
});
