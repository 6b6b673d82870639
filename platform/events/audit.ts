/**
 * Recording events (SPEC section 7, 12.6, 13.3): who did what to whom, written in the same transaction
 * as the change they describe. Each event is named and typed by the event map (./map.ts): its AuditEvent
 * row always, and its webhook outbox row when it is public, together. `data` holds identifiers and
 * masked values only, never a token, code or full number. The row carries the client's address and
 * user agent when recorded while a request is handled (./origin.ts).
 */
import type { Knex } from 'knex';
import { AuditEvent, WebhookEvent } from '../../models/index.js';
import type { DateRange } from '../lists/date-range.js';
import { Repository, type Db } from '../database/unit-of-work.js';
import { newestFirstPage } from '../lists/paging.js';
import { EVENTS, isEventName, type EventName, type EventPayloads, type PublicEventName, type PublicEventPayloads } from './map.js';
import { eventOrigin } from './origin.js';

interface EventEnvelope {
  /** Defaults to the map's severity of the event. */
  severity?: 'info' | 'high';
  /** `anonymous`: a caller not signed in (a refused sign-in names the account tried as its subject, if any). */
  actorType: 'consumer' | 'operator' | 'system' | 'anonymous';
  actorId: string | null;
  subjectType: string | null;
  subjectId: string | null;
}

/** One event of the map: its name, its audit `data` (optional when it carries none) and, when public, its webhook body. */
type EventOf<K extends EventName> = EventEnvelope & { type: K } & (Record<string, never> extends EventPayloads[K]
    ? { data?: EventPayloads[K] }
    : { data: EventPayloads[K] }) &
  (K extends PublicEventName ? { public: PublicEventPayloads[K] } : { public?: never });

/** What `record` takes: any event of the map, typed by its name (a wrong name or payload fails tsc). */
export type AuditInput = { [K in EventName]: EventOf<K> }[EventName];

/** Keeps the country code and the last `keep` digits: `+2348031234567` → `+234••••••4567`, `0123456789` → `••••••6789`. */
export function maskTail(value: string | null | undefined, keep = 4): string | null {
  if (!value) return null;
  const plus = value.startsWith('+') ? '+' : '';
  const digits = value.slice(plus.length);
  if (digits.length <= keep) return value;
  const head = plus ? digits.slice(0, 3) : '';
  return plus + head + '•'.repeat(digits.length - head.length - keep) + digits.slice(-keep);
}

export interface AuditFilter {
  page: number;
  pageSize: number;
  type?: string;
  severity?: 'info' | 'high';
  actorId?: string;
  subjectId?: string;
  range: DateRange;
}

/** The AuditEvent log: written in the unit of work of the change it describes, read by GET /audit-events. */
/** A name cast past the types (a script, a test double) is refused rather than stored unnamed. */
function checkedName(e: AuditInput): EventName {
  if (!isEventName(e.type)) throw new Error(`Unknown event "${String(e.type)}": add it to the event map (platform/events/map.ts)`);
  return e.type;
}

/** The row of an audit event, with the origin (ip, user agent) of the request that caused it. */
function auditRow(e: AuditInput) {
  const origin = eventOrigin();
  return {
    type: e.type,
    severity: e.severity ?? EVENTS[checkedName(e)].severity,
    actorType: e.actorType,
    actorId: e.actorId,
    subjectType: e.subjectType,
    subjectId: e.subjectId,
    data: JSON.stringify(e.data ?? {}),
    ip: origin?.ip ?? null,
    userAgent: origin?.userAgent ?? null,
  };
}

export class AuditEventsRepository extends Repository {
  /**
   * The one way an event is recorded, by the web process, the workers and the scripts alike: its
   * AuditEvent row and, for a public event, its webhook outbox row (the dispatcher in
   * features/webhooks/worker/ delivers it), both in `trx` (or in a transaction of their own). Returns the
   * webhook event id (the `webhook-id` every delivery carries) of a public event.
   */
  async record(e: AuditInput, trx?: Db): Promise<string | undefined> {
    const info = EVENTS[checkedName(e)];
    const write = async (db: Db): Promise<string | undefined> => {
      // A plain insert, not objection's (which would serialise `data` the same way): every audited
      // write runs it.
      await db(AuditEvent.tableName).insert(auditRow(e));
      if (!info.public) return undefined;
      if (!('public' in e) || e.public === undefined) throw new Error(`The public event "${e.type}" needs its webhook body`);
      const [row] = await db(WebhookEvent.tableName)
        .insert({ type: e.type, data: JSON.stringify(e.public) })
        .returning('id');
      return (row as { id: string }).id;
    };
    if (trx || !info.public) return write(this.on(trx));
    return this.db.transaction((t) => write(t));
  }

  /**
   * The INSERT of a non-public event's row as SQL with `?` placeholders and its bindings, for a writer
   * that puts it in its own statement so that both land or neither (the /verify/self canonical refresh:
   * features/face/embeddings-repository.ts `upsert`'s `alongside`). A public event also needs its
   * webhook row: `record` it.
   */
  insertStatement(e: AuditInput): { sql: string; bindings: readonly Knex.Value[] } {
    if (EVENTS[checkedName(e)].public) throw new Error(`The public event "${e.type}" needs its webhook row: record it`);
    const { sql, bindings } = this.db(AuditEvent.tableName).insert(auditRow(e)).toSQL();
    return { sql, bindings };
  }

  /** A page of the log, filtered, newest first. */
  async list(f: AuditFilter): Promise<{ rows: AuditEvent[]; total: number }> {
    const base = () => {
      const qb = AuditEvent.query(this.db);
      if (f.type) qb.where({ type: f.type });
      if (f.severity) qb.where({ severity: f.severity });
      if (f.actorId) qb.where({ actorId: f.actorId });
      if (f.subjectId) qb.where({ subjectId: f.subjectId });
      if (f.range.start) qb.where('createdAt', '>=', f.range.start);
      if (f.range.endExclusive) qb.where('createdAt', '<', f.range.endExclusive);
      return qb;
    };
    return newestFirstPage(base, f);
  }
}
