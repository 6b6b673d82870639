/**
 * AuditEvent rows (SPEC section 7): who did what to whom, written in the same transaction as the change
 * they describe. `data` holds identifiers and masked values only, never a token, code or full number.
 */
import { AuditEvent } from '../../models/index.js';
import type { DateRange } from '../date-range.js';
import { newestFirstPage, Repository, type Db } from './handle.js';

export interface AuditInput {
  type: string;
  severity?: 'info' | 'high';
  actorType: 'consumer' | 'operator' | 'system';
  actorId: string | null;
  subjectType: string;
  subjectId: string;
  data?: Record<string, unknown>;
}

/** The one way an AuditEvent row is written, by the web process and the workers alike. */
export async function recordAudit(db: Db, e: AuditInput): Promise<void> {
  await AuditEvent.query(db).insert({
    type: e.type,
    severity: e.severity ?? 'info',
    actorType: e.actorType,
    actorId: e.actorId,
    subjectType: e.subjectType,
    subjectId: e.subjectId,
    data: e.data ?? {},
  });
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

/** Reading the AuditEvent log (GET /audit-events): filters and paging, newest first. */
export class AuditEventsRepository extends Repository {
  async list(f: AuditFilter): Promise<{ rows: AuditEvent[]; total: number }> {
    const base = () => {
      const qb = this.db(AuditEvent.tableName);
      if (f.type) qb.where({ type: f.type });
      if (f.severity) qb.where({ severity: f.severity });
      if (f.actorId) qb.where({ actorId: f.actorId });
      if (f.subjectId) qb.where({ subjectId: f.subjectId });
      if (f.range.start) qb.where('createdAt', '>=', f.range.start);
      if (f.range.endExclusive) qb.where('createdAt', '<', f.range.endExclusive);
      return qb;
    };
    const { rows, total } = await newestFirstPage(base, f);
    return { rows: rows as unknown as AuditEvent[], total };
  }
}
