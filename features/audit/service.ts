/**
 * Reading the AuditEvent log (GET /audit-events, administrators). Writing is AuditEventsRepository.record's, in the
 * transaction of the change it describes; `data` holds only identifiers and masked values.
 */
import type { AuditEventsRepository, AuditFilter } from '../../platform/events/audit.js';
import { pageOf, type Page } from '../../platform/lists/paging.js';

export type { AuditFilter };

export interface AuditEventView {
  id: string;
  type: string;
  severity: string;
  actorType: string | null;
  actorId: string | null;
  subjectType: string | null;
  subjectId: string | null;
  data: Record<string, unknown>;
  ip: string | null;
  userAgent: string | null;
  createdAt: string;
}

export class AuditService {
  constructor(private readonly deps: { auditEvents: AuditEventsRepository }) {}

  async list(f: AuditFilter): Promise<Page<AuditEventView>> {
    const { rows, total } = await this.deps.auditEvents.list(f);
    const items = rows.map((r) => ({
      id: String(r.id),
      type: r.type,
      severity: r.severity,
      actorType: r.actorType ?? null,
      actorId: r.actorId ?? null,
      subjectType: r.subjectType ?? null,
      subjectId: r.subjectId ?? null,
      data: (typeof r.data === 'string' ? JSON.parse(r.data) : r.data) as Record<string, unknown>,
      ip: r.ip ?? null,
      userAgent: r.userAgent ?? null,
      createdAt: new Date(r.createdAt).toISOString(),
    }));
    return pageOf(items, f, total);
  }
}
