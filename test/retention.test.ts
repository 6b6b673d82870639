/**
 * The one retention sweep and the erasure, as a deployment runs them: every process connected as a
 * login member of the least-privilege role `faceid_app`, the sweep the repeatable job of the upstream
 * worker (every second here). Each wing's data families (platform/retention/README.md) are checked
 * from the storage: past their period they go, within it they stay, and an erasure takes the user's.
 */
import test from 'ava';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { issueProofToken } from '../features/verification/proof-tokens.js';
import { dataFamilies } from '../processes/data-families.js';
import { RetentionRegistry } from '../platform/retention/registry.js';
import { RetentionSweepError, runRetentionSweep } from '../platform/retention/sweep.js';
import { ROOT, useHarness } from './helpers/harness.js';
import { client } from './helpers/http.js';
import { newConsumer } from './helpers/principals.js';

const h = useHarness(test, { appRole: true, retentionSweep: true, env: { RETENTION_SWEEP_INTERVAL_SECONDS: '1' } });

const daysAgo = (d: number) => new Date(Date.now() - d * 86_400_000);
const exists = async (table: string, id: string) => Boolean(await h.deps.db(table).where({ id }).first());

/** A duplicate-identity case opened at `userId`'s link, keeping a (stand-in) sealed capture. */
async function dedupeCase(userId: string, c: { status?: 'open' | 'confirmed' | 'dismissed'; decidedAt?: Date | null } = {}): Promise<string> {
  const [row] = await h.deps
    .db('dedupeCases')
    .insert({
      kind: 'duplicate',
      status: c.status ?? 'open',
      userId,
      matchedUserId: randomUUID(),
      score: 0.8,
      registry: 'nin',
      captureSealed: randomBytes(64),
      decidedAt: c.decidedAt ?? null,
      createdAt: daysAgo(400),
    })
    .returning('id');
  return row.id as string;
}
const keepsCapture = async (caseId: string) => (await h.deps.db('dedupeCases').where({ id: caseId }).first('captureSealed')).captureSealed !== null;

/** Waits for a `retention.purged` run after `since` for which `done` holds. */
async function sweptUntil(since: Date, done: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 150; i++) {
    const run = await h.deps.db('auditEvents').where({ type: 'retention.purged' }).where('createdAt', '>', since).first();
    if (run && (await done())) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('no retention run purged every expired row within 30 s');
}

test.serial('the processes run as faceid_app: audit rows cannot be deleted directly, and the owner’s function keeps at least a year', async (t) => {
  t.regex(String((await h.deps.db.raw('SELECT current_user AS u')).rows[0].u), /^faceid_test_app$/);
  await t.throwsAsync(h.deps.db.raw('DELETE FROM audit_events'), { message: /permission denied/ });
  await t.throwsAsync(h.deps.db.raw('SELECT purge_audit_events(30, 1000)'), { message: /kept at least 365 days/ });
  const [young] = await h.deps
    .db('auditEvents')
    .insert({ type: 'test.young', actorType: 'system', actorId: null, subjectType: 'test', subjectId: 'x', data: {}, createdAt: daysAgo(364) })
    .returning('id');
  await h.deps.db.raw('SELECT purge_audit_events(365, 1000)');
  t.true(await exists('auditEvents', young.id));
});

test.serial(
  'under faceid_app the sweep purges every family past its period (audit events through the owner role’s function), keeps the rest, and audits the counts',
  async (t) => {
    const since = new Date();
    const user = await newConsumer(h);
    const log = async (createdAt: Date) =>
      (
        await h.deps
          .db('searchLogs')
          .insert({ kind: 'verify_self', userId: user.userId, outcome: 'match', latencyMs: JSON.stringify({ total: 1 }), createdAt })
          .returning('id')
      )[0].id as string;
    const oldLog = await log(daysAgo(500));
    const recentLog = await log(daysAgo(10));
    const [oldAudit] = await h.deps
      .db('auditEvents')
      .insert({
        type: 'profile.changed',
        actorType: 'consumer',
        actorId: user.userId,
        subjectType: 'user',
        subjectId: user.userId,
        data: {},
        createdAt: daysAgo(2500),
      })
      .returning('id');
    const [keptAudit] = await h.deps
      .db('auditEvents')
      .insert({
        type: 'profile.changed',
        actorType: 'consumer',
        actorId: user.userId,
        subjectType: 'user',
        subjectId: user.userId,
        data: {},
        createdAt: daysAgo(2000),
      })
      .returning('id');
    // Dedupe captures: decided past DEDUPE_CAPTURE_RETENTION_DAYS (30) go without anyone opening the cases page.
    const expiredCapture = await dedupeCase(user.userId, { status: 'dismissed', decidedAt: daysAgo(31) });
    const recentCapture = await dedupeCase(user.userId, { status: 'confirmed', decidedAt: daysAgo(5) });
    const openCapture = await dedupeCase(user.userId);
    // Webhook events past WEBHOOK_RETENTION_DAYS (30), dispatched and with nothing pending.
    const [oldEvent] = await h.deps
      .db('webhookEvents')
      .insert({ type: 'user.deleted', data: { userId: user.userId }, createdAt: daysAgo(40), dispatchedAt: daysAgo(40) })
      .returning('id');
    const [recentEvent] = await h.deps
      .db('webhookEvents')
      .insert({ type: 'user.deleted', data: { userId: user.userId }, createdAt: daysAgo(3), dispatchedAt: daysAgo(3) })
      .returning('id');

    // A run that started while the rows above were still being written may have missed the later
    // ones; wait until every expired row is gone (or 30 s pass), then check what had to stay.
    await sweptUntil(
      since,
      async () =>
        !(await exists('searchLogs', oldLog)) &&
        !(await exists('auditEvents', oldAudit.id)) &&
        !(await keepsCapture(expiredCapture)) &&
        !(await exists('webhookEvents', oldEvent.id)),
    );
    t.true(await exists('searchLogs', recentLog));
    t.true(await exists('auditEvents', keptAudit.id), 'an audit row younger than RETENTION_DAYS_AUDIT_EVENTS stays');
    t.true(await exists('dedupeCases', expiredCapture), 'the case itself stays after its capture went');
    t.true(await keepsCapture(recentCapture));
    t.true(await keepsCapture(openCapture), 'an open case keeps its capture');
    t.true(await exists('webhookEvents', recentEvent.id));

    const runs = await h.deps.db('auditEvents').where({ type: 'retention.purged' }).where('createdAt', '>', since);
    const counts = runs.map((r) => r.data.counts as Record<string, number>);
    t.deepEqual(Object.keys(counts[0]!).sort(), ['auditEvents', 'dedupeCaptures', 'disputes', 'refreshTokens', 'searchLogs', 'webhookEvents']);
    const total = (name: string) => counts.reduce((n, c) => n + (c[name] ?? 0), 0);
    t.true(total('auditEvents') >= 1 && total('searchLogs') >= 1 && total('dedupeCaptures') >= 1 && total('webhookEvents') >= 1);
    t.false(
      runs.some((r) => r.data.failed),
      'no family failed',
    );
  },
);

test.serial("an erasure takes the live captures of the user's duplicate-identity cases at once; the cases and other users' captures stay", async (t) => {
  const user = await newConsumer(h);
  const other = await newConsumer(h);
  const own = [await dedupeCase(user.userId), await dedupeCase(user.userId, { status: 'confirmed', decidedAt: daysAgo(1) })];
  const others = await dedupeCase(other.userId);
  const { proofToken } = await issueProofToken(h.deps, user.userId, user.sessionId);
  const del = await client(h.url).delete(`/users/${user.userId}`, { token: user.token, json: { proofToken } });
  t.is(del.status, 200, del.text);
  for (const id of own) {
    t.false(await keepsCapture(id), 'the capture went with the DELETE');
    t.true(await exists('dedupeCases', id), 'the case stays as the record of the decision');
  }
  t.true(await keepsCapture(others));
  const receipt = await h.deps.db('auditEvents').where({ type: 'user.erased', subjectId: user.userId }).first();
  t.truthy(receipt, 'the erasure completed under faceid_app');
});

test('a family whose purge fails is reported, and neither the erasures nor the other families wait for it', async (t) => {
  const ran: string[] = [];
  const registry = new RetentionRegistry().register(
    { name: 'broken', store: 'nowhere', retention: { days: 1, rule: 'always fails', purge: () => Promise.reject(new Error('permission denied')) } },
    { name: 'fine', store: 'memory', retention: { days: 1, rule: 'counts', purge: async () => (ran.push('fine'), 2) } },
  );
  const finished: string[] = [];
  const ledger = { awaitingAfterCommit: async () => [], markAfterCommitDone: async () => {}, completeCovered: async () => (finished.push('done'), ['u']) };
  const err = await t.throwsAsync(runRetentionSweep({ db: h.deps.db, registry, ledger, logger: h.deps.logger }), { instanceOf: RetentionSweepError });
  t.deepEqual(err?.result, { purged: { fine: 2 }, erasuresFinished: 1, failed: ['broken'] });
  t.deepEqual(ran, ['fine']);
  t.deepEqual(finished, ['done']);
});

test('every data family is documented in docs/data-protection.md', (t) => {
  const doc = readFileSync(path.join(ROOT, 'docs/data-protection.md'), 'utf8');
  const registry = dataFamilies({
    db: h.deps.db,
    config: h.config,
    identityTokens: { purgeUser: async () => 0 },
    biometricAttempts: { purgeUser: async () => 0 },
    livenessSessions: { purgeUser: async () => 0 },
  });
  for (const f of registry.families()) t.true(doc.includes(`\`${f.name}\``), `${f.name} is not in docs/data-protection.md`);
});
