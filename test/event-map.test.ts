/**
 * The event map (platform/events/map.ts): one name per fact. Held against SPEC's names (the webhook
 * types of 12.6 and the audit types it names), against every name the product code records, and
 * against the rows a former release stored under other names (the migration renames them).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { createDb } from '../platform/database/db.js';
import { AuditEventsRepository, type AuditInput } from '../platform/events/audit.js';
import { EVENT_NAMES, EVENTS, FORMER_EVENT_NAMES, PUBLIC_EVENT_TYPES } from '../platform/events/map.js';
import { WEBHOOK_EVENT_TYPES } from '../features/webhooks/index.js';
import { createTestDatabase } from './helpers/db.js';
import { ROOT } from './helpers/harness.js';

/** SPEC 12.6, "event types (at least)". */
const SPEC_WEBHOOK_TYPES = [
  'user.bank_account.updated',
  'user.deleted',
  'dispute.created',
  'dispute.updated',
  'identify.escalated',
  'dedupe.case.opened',
  'dedupe.case.decided',
  'operator.deactivated',
];
/** Audit types SPEC names (12.1, 12.4, 13.3). */
const SPEC_AUDIT_TYPES = ['biometric.locked', 'user.erased', 'operator.locked', 'auth.signed_in', 'auth.sign_in_failed', 'user.exported'];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) return name === 'node_modules' ? [] : sourceFiles(p);
    return p.endsWith('.ts') && !p.endsWith('.d.ts') ? [p] : [];
  });
}

/**
 * The text of each call that records an event: `.record(...)`, or `.insertStatement(...)` (the same row
 * written inside another statement), whose argument has a `type:`.
 */
function recordCalls(text: string): string[] {
  const calls: string[] = [];
  for (const opener of ['.record(', '.insertStatement(']) {
    for (let i = text.indexOf(opener); i >= 0; i = text.indexOf(opener, i + 1)) {
      let depth = 0;
      let j = i + opener.length - 1;
      for (; j < text.length; j++) {
        if (text[j] === '(') depth++;
        else if (text[j] === ')' && --depth === 0) break;
      }
      const call = text.slice(i, j + 1);
      if (/\btype:/.test(call)) calls.push(call);
    }
  }
  return calls;
}

/** Every event name the product code records, with the file it is recorded in. */
function recordedNames(): { name: string; file: string }[] {
  const found: { name: string; file: string }[] = [];
  for (const top of ['features', 'platform', 'processes', 'scripts']) {
    for (const file of sourceFiles(path.join(ROOT, top))) {
      for (const call of recordCalls(readFileSync(file, 'utf8'))) {
        // `type: 'a.b'` and `type: cond ? 'a.b' : 'c.d'`
        for (const m of call.matchAll(/type:\s*([^,\n}]*)/g)) {
          for (const lit of m[1]!.matchAll(/'([a-z_]+(?:\.[a-z_]+)+)'/g)) found.push({ name: lit[1]!, file: path.relative(ROOT, file) });
        }
      }
    }
  }
  return found;
}

test('the webhook types are the public events of the map, exactly SPEC 12.6', (t) => {
  t.deepEqual([...PUBLIC_EVENT_TYPES].sort(), [...SPEC_WEBHOOK_TYPES].sort());
  t.is(WEBHOOK_EVENT_TYPES, PUBLIC_EVENT_TYPES, 'the webhook wing reads the map, it keeps no list of its own');
});

test('the audit types SPEC names are events of the map, under those names', (t) => {
  for (const name of SPEC_AUDIT_TYPES) t.true(EVENT_NAMES.includes(name as never), name);
});

test('every name the code records is in the map, and every event of the map is recorded somewhere', (t) => {
  const recorded = recordedNames();
  t.true(recorded.length > 30, `the scan found the record calls (${recorded.length})`);
  const unknown = recorded.filter((r) => !EVENT_NAMES.includes(r.name as never));
  t.deepEqual(unknown, [], 'names recorded outside the map');
  const names = new Set(recorded.map((r) => r.name));
  t.deepEqual(
    EVENT_NAMES.filter((n) => !names.has(n)),
    [],
    'events of the map nobody records',
  );
});

test('one name per fact: no former name is still an event, and each maps to one', (t) => {
  for (const [former, now] of Object.entries(FORMER_EVENT_NAMES)) {
    t.false(former in EVENTS, `${former} is no longer recorded`);
    t.true(now in EVENTS, `${former} became ${now}`);
  }
});

test('recording a name outside the map is refused; a public event writes its audit row and its outbox row together', async (t) => {
  const tdb = await createTestDatabase();
  const db = createDb(tdb.url, 2);
  try {
    const events = new AuditEventsRepository(db);
    const bogus = { type: 'dedupe.case_opened', actorType: 'system', actorId: null, subjectType: null, subjectId: null } as unknown as AuditInput;
    await t.throwsAsync(events.record(bogus), { message: /Unknown event "dedupe.case_opened"/ });
    t.is(Number((await db('audit_events').count({ n: '*' }).first())!.n), 0);

    const operatorId = '00000000-0000-4000-8000-0000000000aa';
    const eventId = await events.record({
      type: 'operator.deactivated',
      actorType: 'system',
      actorId: null,
      subjectType: 'operator',
      subjectId: operatorId,
      data: { from: 'active', to: 'deactivated', sessionsRevoked: 0 },
      public: { operatorId },
    });
    const audit = await db('audit_events').where({ type: 'operator.deactivated' }).first();
    t.like(audit, { severity: 'high', subjectId: operatorId, ip: null, userAgent: null });
    const outbox = await db('webhook_events').where({ id: eventId }).first();
    t.like(outbox, { type: 'operator.deactivated', data: { operatorId } });

    // Rolled back together: neither row outlives the change's transaction.
    await t.throwsAsync(
      db.transaction(async (trx) => {
        await events.record(
          {
            type: 'user.deleted',
            actorType: 'system',
            actorId: null,
            subjectType: 'user',
            subjectId: operatorId,
            data: { embeddingRemoved: true, refreshTokensRevoked: 0 },
            public: { userId: operatorId },
          },
          trx,
        );
        throw new Error('the change failed');
      }),
    );
    t.is(Number((await db('audit_events').where({ type: 'user.deleted' }).count({ n: '*' }).first())!.n), 0);
    t.is(Number((await db('webhook_events').where({ type: 'user.deleted' }).count({ n: '*' }).first())!.n), 0);
  } finally {
    await db.destroy();
    await tdb.drop();
  }
});

test('rows stored under a former name are renamed by the migration, so a filter by type finds them', async (t) => {
  const tdb = await createTestDatabase();
  const db = createDb(tdb.url, 2);
  try {
    await db.migrate.down({ name: '20261127200000_event_names.ts' });
    const row = (type: string, data: object = {}) => ({ type, actorType: 'system', subjectType: 'x', subjectId: type, data: JSON.stringify(data) });
    await db('audit_events').insert([
      ...Object.keys(FORMER_EVENT_NAMES).map((former) => row(former)),
      row('operator.status_changed', { from: 'active', to: 'deactivated' }),
      { ...row('operator.status_changed', { from: 'deactivated', to: 'active' }), subjectId: 'reactivation' },
    ]);
    await db.migrate.latest();
    const types = Object.fromEntries((await db('audit_events').select('subjectId', 'type')).map((r) => [r.subjectId, r.type]));
    for (const [former, now] of Object.entries(FORMER_EVENT_NAMES)) t.is(types[former], now, former);
    t.is(types['operator.status_changed'], 'operator.deactivated');
    t.is(types['reactivation'], 'operator.reactivated');
  } finally {
    await db.destroy();
    await tdb.drop();
  }
});

// A wrong payload or a public event without its webhook body fails tsc (this function is never run).
export function typedPayloads(events: AuditEventsRepository): void {
  const envelope = { actorType: 'system', actorId: null, subjectType: 'user', subjectId: 'u' } as const;
  // @ts-expect-error `auth.signed_in` carries { method, sessionId }
  void events.record({ ...envelope, type: 'auth.signed_in', data: { method: 'sms' } });
  // @ts-expect-error a public event needs its webhook body
  void events.record({ ...envelope, type: 'user.deleted', data: { embeddingRemoved: true, refreshTokensRevoked: 0 } });
  // @ts-expect-error an internal event has no webhook body
  void events.record({ ...envelope, type: 'user.exported', data: { sections: [] }, public: { userId: 'u' } });
}
