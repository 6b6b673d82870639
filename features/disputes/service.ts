/**
 * Disputes: a consumer contests one SearchLog entry that concerns them (an /identify that matched them,
 * or a /verify/self they ran); administrators work the dispute through
 * open → investigating → resolved | rejected. Every change is audited.
 */
import type { DisputeStatus } from '../../models/index.js';
import { AppError } from '../../platform/errors.js';
import type { AuditEventsRepository } from '../../platform/events/audit.js';
import type { Tx, UnitOfWork } from '../../platform/database/unit-of-work.js';
import type { DateRange } from '../../platform/lists/date-range.js';
import { isUniqueViolation } from '../../platform/database/unit-of-work.js';
import type { DisputeRow, SearchLogsRepository } from '../verification/index.js';
import { pageOf, type Page } from '../../platform/lists/paging.js';

export const DISPUTE_STATUSES = ['open', 'investigating', 'resolved', 'rejected'] as const satisfies readonly DisputeStatus[];
export type { DisputeStatus };

/** The only moves an administrator can make; anything else (including staying put) is 409. */
export const DISPUTE_TRANSITIONS: Readonly<Record<DisputeStatus, readonly DisputeStatus[]>> = {
  open: ['investigating'],
  investigating: ['resolved', 'rejected'],
  resolved: [],
  rejected: [],
};

export interface DisputeView {
  id: string;
  referenceId: string;
  kind: 'identify' | 'verify_self';
  userId: string;
  reason: string | null;
  status: DisputeStatus;
  note: string | null;
  createdAt: string;
  updatedAt: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
function toView(r: DisputeRow): DisputeView {
  return {
    id: r.id,
    referenceId: r.searchLogId,
    kind: r.kind,
    userId: r.userId,
    reason: r.reason ?? null,
    status: r.status,
    note: r.note ?? null,
    createdAt: new Date(r.createdAt).toISOString(),
    updatedAt: new Date(r.updatedAt).toISOString(),
  };
}

export interface DisputeFilters {
  status?: DisputeStatus;
  userId?: string;
  referenceId?: string;
  range: DateRange;
  page: number;
  pageSize: number;
}

export class DisputeService {
  constructor(private readonly deps: { unitOfWork: UnitOfWork; auditEvents: AuditEventsRepository; searchLogs: SearchLogsRepository }) {}

  private async load(id: string, trx?: Tx): Promise<DisputeView> {
    return toView((await this.deps.searchLogs.findDispute(id, trx))!);
  }

  async create(userId: string, input: { referenceId: string; reason?: string }): Promise<DisputeView> {
    const { searchLogs } = this.deps;
    if (!UUID.test(input.referenceId)) throw new AppError('not_found', 'No history entry has this referenceId');
    const entry = await searchLogs.concerning(input.referenceId, userId);
    if (!entry) throw new AppError('not_found', 'No history entry has this referenceId');
    if (!entry.concernsCaller) throw new AppError('forbidden', 'You can only dispute an entry that matched you or a /verify/self you ran');

    const reason = input.reason === undefined || input.reason.trim() === '' ? null : input.reason;
    try {
      const id = await this.deps.unitOfWork.run(async (trx) => {
        const disputeId = await searchLogs.insertDispute({ searchLogId: input.referenceId, userId, reason }, trx);
        await this.deps.auditEvents.record(
          {
            type: 'dispute.created',
            actorType: 'consumer',
            actorId: userId,
            subjectType: 'dispute',
            subjectId: disputeId,
            data: { referenceId: input.referenceId, status: 'open' },
            public: { disputeId, referenceId: input.referenceId, userId, status: 'open' },
          },
          trx,
        );
        return disputeId;
      });
      return await this.load(id);
    } catch (e) {
      if (isUniqueViolation(e)) throw new AppError('conflict', 'You have already disputed this entry');
      throw e;
    }
  }

  async list(f: DisputeFilters): Promise<Page<DisputeView>> {
    const { rows, total } = await this.deps.searchLogs.disputePage(f, f.page, f.pageSize);
    return pageOf(rows.map(toView), f, total);
  }

  async updateStatus(operatorId: string, disputeId: string, change: { status: DisputeStatus; note?: string }): Promise<DisputeView> {
    const { searchLogs } = this.deps;
    return this.deps.unitOfWork.run(async (trx) => {
      const from = await searchLogs.disputeStatus(disputeId, trx);
      if (!from) throw new AppError('not_found', 'Dispute not found');
      const allowed = DISPUTE_TRANSITIONS[from] ?? [];
      if (!allowed.includes(change.status)) {
        throw new AppError('conflict', `A dispute cannot move from ${from} to ${change.status}`, {
          details: { from, to: change.status, allowed: [...allowed] },
        });
      }
      // Conditional on the status read above: of two administrators racing, one wins, the other gets 409.
      const moved = await searchLogs.moveDispute(disputeId, from, { status: change.status, note: change.note, updatedBy: operatorId }, trx);
      if (!moved) throw new AppError('conflict', 'The dispute changed meanwhile; read it again', { details: { from } });
      const dispute = await this.load(disputeId, trx);
      await this.deps.auditEvents.record(
        {
          type: 'dispute.updated',
          actorType: 'operator',
          actorId: operatorId,
          subjectType: 'dispute',
          subjectId: disputeId,
          data: { from, to: change.status, ...(change.note !== undefined ? { note: change.note } : {}) },
          // The note is free text: it stays out of the webhook.
          public: { disputeId, referenceId: dispute.referenceId, userId: dispute.userId, previousStatus: from, status: dispute.status },
        },
        trx,
      );
      return dispute;
    });
  }
}
