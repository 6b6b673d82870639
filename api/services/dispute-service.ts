/**
 * Disputes: a consumer contests one SearchLog entry that concerns them (an /identify that matched them,
 * or a /verify/self they ran); administrators work the dispute through
 * open → investigating → resolved | rejected. Every change is audited.
 */
import type { Knex } from 'knex';
import { AppError } from '../../shared/errors.js';
import { recordAudit } from './audit-events.js';
import { whereInRange, type DateRange } from './date-range.js';

export const DISPUTE_STATUSES = ['open', 'investigating', 'resolved', 'rejected'] as const;
export type DisputeStatus = (typeof DISPUTE_STATUSES)[number];

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
const UNIQUE_VIOLATION = '23505';

function baseQuery(db: Knex | Knex.Transaction): Knex.QueryBuilder {
  return db('disputes as d')
    .join('searchLogs as s', 's.id', 'd.searchLogId')
    .select('d.id', 'd.searchLogId', 's.kind', 'd.userId', 'd.reason', 'd.status', 'd.note', 'd.createdAt', 'd.updatedAt');
}

function toView(r: Record<string, any>): DisputeView {
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

async function loadDispute(db: Knex | Knex.Transaction, id: string): Promise<DisputeView | null> {
  const row = await baseQuery(db).where('d.id', id).first();
  return row ? toView(row) : null;
}

export async function createDispute(db: Knex, userId: string, input: { referenceId: string; reason?: string }): Promise<DisputeView> {
  if (!UUID.test(input.referenceId)) throw new AppError('not_found', 'No history entry has this referenceId');
  const entry = await db('searchLogs as s')
    .where('s.id', input.referenceId)
    .first(
      's.id',
      db.raw(
        `((s.kind = 'identify' AND ?::uuid = ANY(s.matched_user_ids)) OR (s.kind = 'verify_self' AND s.user_id = ?::uuid)) AS concerns_caller`,
        [userId, userId],
      ),
    );
  if (!entry) throw new AppError('not_found', 'No history entry has this referenceId');
  if (!entry.concernsCaller) throw new AppError('forbidden', 'You can only dispute an entry that matched you or a /verify/self you ran');

  const reason = input.reason === undefined || input.reason.trim() === '' ? null : input.reason;
  try {
    const id = await db.transaction(async (trx) => {
      const [row] = await trx('disputes').insert({ searchLogId: input.referenceId, userId, reason, status: 'open' }).returning(['id']);
      await recordAudit(trx, {
        type: 'dispute.created',
        actorType: 'consumer',
        actorId: userId,
        subjectType: 'dispute',
        subjectId: row.id,
        data: { referenceId: input.referenceId, status: 'open' },
      });
      return row.id as string;
    });
    return (await loadDispute(db, id))!;
  } catch (e) {
    if ((e as { code?: string }).code === UNIQUE_VIOLATION) throw new AppError('conflict', 'You have already disputed this entry');
    throw e;
  }
}

export interface DisputeFilters {
  status?: DisputeStatus;
  userId?: string;
  referenceId?: string;
  range: DateRange;
  page: number;
  pageSize: number;
}

export async function listDisputes(db: Knex, f: DisputeFilters): Promise<{ items: DisputeView[]; page: number; pageSize: number; total: number }> {
  const filtered = (q: Knex.QueryBuilder) => {
    if (f.status) q.where('d.status', f.status);
    if (f.userId) q.where('d.userId', f.userId);
    if (f.referenceId) q.where('d.searchLogId', f.referenceId);
    return whereInRange(q, 'd.createdAt', f.range);
  };
  const [countRow] = await filtered(db('disputes as d')).count<{ count: string }[]>({ count: '*' });
  const rows = await filtered(baseQuery(db))
    .orderBy([{ column: 'd.createdAt', order: 'desc' }, { column: 'd.id', order: 'desc' }])
    .limit(f.pageSize)
    .offset((f.page - 1) * f.pageSize);
  return { items: rows.map(toView), page: f.page, pageSize: f.pageSize, total: Number(countRow?.count ?? 0) };
}

export async function updateDisputeStatus(
  db: Knex,
  operatorId: string,
  disputeId: string,
  change: { status: DisputeStatus; note?: string },
): Promise<DisputeView> {
  return db.transaction(async (trx) => {
    const current = await trx('disputes').where({ id: disputeId }).first('status');
    if (!current) throw new AppError('not_found', 'Dispute not found');
    const from = current.status as DisputeStatus;
    const allowed = DISPUTE_TRANSITIONS[from] ?? [];
    if (!allowed.includes(change.status)) {
      throw new AppError('conflict', `A dispute cannot move from ${from} to ${change.status}`, {
        details: { from, to: change.status, allowed: [...allowed] },
      });
    }
    // Conditional on the status read above: of two administrators racing, one wins, the other gets 409.
    const updated = await trx('disputes')
      .where({ id: disputeId, status: from })
      .update({
        status: change.status,
        ...(change.note !== undefined ? { note: change.note } : {}),
        updatedBy: operatorId,
        updatedAt: trx.fn.now(),
      })
      .returning(['id']);
    if (updated.length === 0) throw new AppError('conflict', 'The dispute changed meanwhile; read it again', { details: { from } });
    await recordAudit(trx, {
      type: 'dispute.status_changed',
      actorType: 'operator',
      actorId: operatorId,
      subjectType: 'dispute',
      subjectId: disputeId,
      data: { from, to: change.status, ...(change.note !== undefined ? { note: change.note } : {}) },
    });
    return (await loadDispute(trx, disputeId))!;
  });
}
