/**
 * Reading the AuditEvent log (GET /audit-events, administrators): filters and paging, newest first.
 * Writing stays in audit-events.ts. `data` holds only identifiers and masked values (see there).
 */
import type { Knex } from 'knex';
import type { DateRange } from './date-range.js';

export interface AuditFilter {
  page: number;
  pageSize: number;
  type?: string;
  severity?: 'info' | 'high';
  actorId?: string;
  subjectId?: string;
  range: DateRange;
}

export interface AuditEventView {
  id: string;
  type: string;
  severity: string;
  actorType: string | null;
  actorId: string | null;
  subjectType: string | null;
  subjectId: string | null;
  data: Record<string, unknown>;
  createdAt: string;
}

export async function listAuditEvents(db: Knex, f: AuditFilter): Promise<{ items: AuditEventView[]; page: number; pageSize: number; total: number }> {
  const base = () => {
    const qb = db('auditEvents');
    if (f.type) qb.where({ type: f.type });
    if (f.severity) qb.where({ severity: f.severity });
    if (f.actorId) qb.where({ actorId: f.actorId });
    if (f.subjectId) qb.where({ subjectId: f.subjectId });
    if (f.range.start) qb.where('createdAt', '>=', f.range.start);
    if (f.range.endExclusive) qb.where('createdAt', '<', f.range.endExclusive);
    return qb;
  };
  const [rows, [{ total }]] = await Promise.all([
    base()
      .select('*')
      .orderBy([{ column: 'createdAt', order: 'desc' }, { column: 'id', order: 'desc' }])
      .limit(f.pageSize)
      .offset((f.page - 1) * f.pageSize),
    base().count({ total: '*' }),
  ]);
  const items = rows.map((r: Record<string, unknown>) => ({
    id: String(r.id),
    type: r.type as string,
    severity: r.severity as string,
    actorType: (r.actorType as string | null) ?? null,
    actorId: (r.actorId as string | null) ?? null,
    subjectType: (r.subjectType as string | null) ?? null,
    subjectId: (r.subjectId as string | null) ?? null,
    data: (typeof r.data === 'string' ? JSON.parse(r.data) : r.data) as Record<string, unknown>,
    createdAt: (r.createdAt as Date).toISOString(),
  }));
  return { items, page: f.page, pageSize: f.pageSize, total: Number(total) };
}
