/**
 * AuditEvent rows (SPEC section 7): who did what to whom, written in the same transaction as the change
 * they describe. `data` holds identifiers and masked values only, never a token, code or full number.
 */
import { AuditEvent } from '../../models/index.js';
import type { DateRange } from '../lists/date-range.js';
import { Repository, type Db } from '../database/unit-of-work.js';
import { newestFirstPage } from '../lists/paging.js';

export interface AuditInput {
  type: string;
  severity?: 'info' | 'high';
  actorType: 'consumer' | 'operator' | 'system';
  actorId: string | null;
  subjectType: string;
  subjectId: string;
  data?: Record<string, unknown>;
}

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
export class AuditEventsRepository extends Repository {
  /** The one way an AuditEvent row is written, by the web process, the workers and the scripts alike. */
  async record(e: AuditInput, trx?: Db): Promise<void> {
    await AuditEvent.query(this.on(trx)).insert({
      type: e.type,
      severity: e.severity ?? 'info',
      actorType: e.actorType,
      actorId: e.actorId,
      subjectType: e.subjectType,
      subjectId: e.subjectId,
      data: e.data ?? {},
    });
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
