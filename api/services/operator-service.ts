/**
 * Operator accounts, as administrators manage them: creation with a temporary password, the only
 * password reset there is, role and status changes, deactivation (the row and its history are kept),
 * the SearchLog of an operator's /identify calls, and the first administrator of a deployment.
 *
 * Every state change writes an AuditEvent in the same transaction. Deactivation and password resets
 * revoke the operator's sessions at once. The last active, unlocked administrator cannot be demoted or
 * deactivated (409 `conflict`): a deployment always keeps someone who can manage it
 * (docs/decisions.md). Changes that could remove an administrator are serialised by an advisory lock.
 */
import type { Knex } from 'knex';
import type { Config } from '../../shared/config.js';
import { AppError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import { Operator, type OperatorRole, type OperatorStatus } from '../../models/index.js';
import { recordAudit } from './audit-events.js';
import { hashPassword, temporaryPassword } from './passwords.js';
import { revokeSubjectSessions } from './session-service.js';

export interface OperatorDeps {
  db: Knex;
  logger?: Logger;
}

/** Who acts: an administrator through the API, or the system (start-up, `npm run create-admin`). */
export type Actor = { type: 'operator'; id: string } | { type: 'system'; id?: null };

export type PublicOperator = ReturnType<Operator['toPublic']>;

export const IDENTIFIER_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._@+-]{2,63}$';
export const ORG_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const notFound = () => new AppError('not_found', 'Operator not found');

const toOperator = (row: Record<string, unknown>) => Operator.fromDatabaseJson(row) as Operator;

function auditActor(actor: Actor) {
  return { actorType: actor.type, actorId: actor.type === 'operator' ? actor.id : null } as const;
}

/** Serialises every change that could leave the deployment without an administrator. */
async function lockAdministrators(trx: Knex.Transaction): Promise<void> {
  await trx.raw("SELECT pg_advisory_xact_lock(hashtext('faceid:operators:administrators'))");
}

async function findForUpdate(trx: Knex.Transaction, id: string): Promise<Operator> {
  if (!UUID.test(id)) throw notFound();
  const row = await trx('operators').where({ id }).forUpdate().first();
  if (!row) throw notFound();
  return toOperator(row);
}

/** Active, unlocked administrators other than `exceptId`: the ones who could still manage the deployment. */
async function otherManagingAdministrators(db: Knex | Knex.Transaction, exceptId: string): Promise<number> {
  const [{ count }] = await db('operators')
    .where({ role: 'administrator', status: 'active' })
    .whereNull('lockedAt')
    .whereNot({ id: exceptId })
    .count({ count: '*' });
  return Number(count);
}

export interface NewOperator {
  identifier: string;
  displayName: string;
  role?: OperatorRole;
  orgId?: string;
}

/**
 * Creates an operator. Without `password`, a temporary one is generated, returned once, and the
 * account is flagged (must set its own password first). 409 `conflict` when the identifier is taken
 * (compared case-insensitively).
 */
export async function createOperator(
  deps: OperatorDeps,
  input: NewOperator,
  actor: Actor,
  opts: { password?: string; via?: string } = {},
): Promise<{ operator: Operator; temporaryPassword: string | null }> {
  if (!new RegExp(IDENTIFIER_PATTERN).test(input.identifier)) {
    throw new AppError('validation_failed', 'The request is not valid', {
      details: { errors: [{ in: 'body', path: '/identifier', message: `must match pattern "${IDENTIFIER_PATTERN}"` }] },
    });
  }
  const temp = opts.password === undefined ? temporaryPassword() : null;
  const passwordHash = await hashPassword(opts.password ?? temp!);
  try {
    const operator = await deps.db.transaction(async (trx) => {
      const [row] = await trx('operators')
        .insert({
          identifier: input.identifier,
          displayName: input.displayName,
          role: input.role ?? 'operator',
          status: 'active',
          mustResetPassword: temp !== null,
          passwordHash,
          orgId: input.orgId ?? 'default',
          createdBy: actor.type === 'operator' ? actor.id : null,
        })
        .returning('*');
      await recordAudit(trx, {
        type: 'operator.created',
        ...auditActor(actor),
        subjectType: 'operator',
        subjectId: row.id,
        data: { identifier: row.identifier, role: row.role, orgId: row.orgId, ...(opts.via ? { via: opts.via } : {}) },
      });
      return toOperator(row);
    });
    return { operator, temporaryPassword: temp };
  } catch (e) {
    if ((e as { code?: string }).code === '23505') throw new AppError('conflict', 'This identifier is already taken');
    throw e;
  }
}

export async function getOperator(deps: OperatorDeps, id: string): Promise<Operator> {
  if (!UUID.test(id)) throw notFound();
  const row = await deps.db('operators').where({ id }).first();
  if (!row) throw notFound();
  return toOperator(row);
}

export interface OperatorPatch {
  displayName?: string;
  role?: OperatorRole;
  status?: OperatorStatus;
}

/**
 * PATCH /operators/{id} (and DELETE, as `{ status: 'deactivated' }`). Unchanged values are no-ops.
 * Deactivation revokes every session of the operator; reactivation does not bring them back.
 */
export async function updateOperator(deps: OperatorDeps, id: string, patch: OperatorPatch, actor: Actor): Promise<Operator> {
  return deps.db.transaction(async (trx) => {
    if (patch.role !== undefined || patch.status !== undefined) await lockAdministrators(trx);
    const op = await findForUpdate(trx, id);
    const changes: Partial<Record<'displayName' | 'role' | 'status', string>> = {};
    if (patch.displayName !== undefined && patch.displayName !== op.displayName) changes.displayName = patch.displayName;
    if (patch.role !== undefined && patch.role !== op.role) changes.role = patch.role;
    if (patch.status !== undefined && patch.status !== op.status) changes.status = patch.status;
    if (Object.keys(changes).length === 0) return op;

    const wasManagingAdmin = op.role === 'administrator' && op.status === 'active';
    const staysManagingAdmin = (changes.role ?? op.role) === 'administrator' && (changes.status ?? op.status) === 'active';
    if (wasManagingAdmin && !staysManagingAdmin && (await otherManagingAdministrators(trx, op.id)) === 0) {
      throw new AppError('conflict', 'This is the last active administrator: promote or unlock another administrator first');
    }

    const [row] = await trx('operators')
      .where({ id: op.id })
      .update({ ...changes, updatedAt: trx.fn.now() })
      .returning('*');
    const subject = { subjectType: 'operator', subjectId: op.id, ...auditActor(actor) };
    if (changes.role) {
      await recordAudit(trx, { type: 'operator.role_changed', ...subject, data: { from: op.role, to: changes.role } });
    }
    if (changes.status) {
      const revoked = changes.status === 'deactivated' ? await revokeSubjectSessions(trx, { type: 'operator', id: op.id }, 'operator_deactivated') : 0;
      await recordAudit(trx, {
        type: 'operator.status_changed',
        severity: changes.status === 'deactivated' ? 'high' : 'info',
        ...subject,
        data: { from: op.status, to: changes.status, sessionsRevoked: revoked },
      });
    }
    if (changes.displayName) {
      await recordAudit(trx, { type: 'operator.display_name_changed', ...subject, data: {} });
    }
    return toOperator(row);
  });
}

/** DELETE /operators/{id}: deactivation, never a hard delete (SearchLog and AuditEvent history stay). */
export function deactivateOperator(deps: OperatorDeps, id: string, actor: Actor): Promise<Operator> {
  return updateOperator(deps, id, { status: 'deactivated' }, actor);
}

/**
 * POST /operators/{id}/reset-password, the only password reset there is: a fresh temporary password,
 * flagged, unlocked, the failure counter cleared, and every session of the operator revoked.
 */
export async function resetOperatorPassword(deps: OperatorDeps, id: string, actor: Actor): Promise<{ temporaryPassword: string; mustResetPassword: true }> {
  if (!UUID.test(id)) throw notFound();
  const temp = temporaryPassword();
  const passwordHash = await hashPassword(temp);
  await deps.db.transaction(async (trx) => {
    const op = await findForUpdate(trx, id);
    await trx('operators')
      .where({ id })
      .update({ passwordHash, mustResetPassword: true, failedLoginCount: 0, lockedAt: null, updatedAt: trx.fn.now() });
    const revoked = await revokeSubjectSessions(trx, { type: 'operator', id }, 'password_reset');
    await recordAudit(trx, {
      type: 'operator.password_reset',
      ...auditActor(actor),
      subjectType: 'operator',
      subjectId: id,
      data: { wasLocked: op.lockedAt !== null, sessionsRevoked: revoked },
    });
  });
  return { temporaryPassword: temp, mustResetPassword: true };
}

/** GET /operators/{id}/sessions: full SearchLog rows of the operator's /identify calls, newest first. */
export async function operatorSearchLogs(
  deps: OperatorDeps,
  id: string,
  page: { page: number; pageSize: number },
): Promise<{ items: Record<string, unknown>[]; page: number; pageSize: number; total: number }> {
  await getOperator(deps, id);
  const base = () => deps.db('searchLogs').where({ kind: 'identify', operatorId: id });
  const [rows, [{ total }]] = await Promise.all([
    base()
      .select('*')
      .orderBy([{ column: 'createdAt', order: 'desc' }, { column: 'id', order: 'desc' }])
      .limit(page.pageSize)
      .offset((page.page - 1) * page.pageSize),
    base().count({ total: '*' }),
  ]);
  const items = rows.map((r: Record<string, unknown>) => ({ referenceId: r.id, ...r }));
  return { items, page: page.page, pageSize: page.pageSize, total: Number(total) };
}

/**
 * The first administrator of a deployment, from ADMIN_IDENTIFIER / ADMIN_PASSWORD: created when no
 * active administrator exists, with the password the environment gives (so not flagged). Does nothing
 * when unset, when an active administrator exists, or when the identifier is taken (logged). Safe to
 * call from several processes at once. Called by the web process at start-up (api/server.ts).
 */
export async function ensureFirstAdministrator(
  deps: OperatorDeps & { config: Pick<Config, 'adminIdentifier' | 'adminPassword'> },
): Promise<{ created: boolean; operatorId?: string; reason?: string }> {
  const { adminIdentifier: identifier, adminPassword: password } = deps.config;
  if (!identifier || !password) return { created: false, reason: 'not_configured' };
  if (password.length < 8) throw new Error('ADMIN_PASSWORD must have at least 8 characters');
  // Hash outside the transaction: it takes tens of milliseconds and holds no lock.
  const passwordHash = await hashPassword(password);
  const result = await deps.db.transaction(async (trx) => {
    await lockAdministrators(trx);
    const admin = await trx('operators').where({ role: 'administrator', status: 'active' }).first('id');
    if (admin) return { created: false, reason: 'administrator_exists' };
    const taken = await trx('operators').whereRaw('lower(identifier) = lower(?)', [identifier]).first('id');
    if (taken) return { created: false, reason: 'identifier_taken' };
    const [row] = await trx('operators')
      .insert({ identifier, displayName: identifier, role: 'administrator', status: 'active', mustResetPassword: false, passwordHash })
      .returning('id');
    await recordAudit(trx, {
      type: 'operator.created',
      actorType: 'system',
      actorId: null,
      subjectType: 'operator',
      subjectId: row.id,
      data: { identifier, role: 'administrator', orgId: 'default', via: 'ADMIN_IDENTIFIER' },
    });
    return { created: true, operatorId: row.id as string };
  });
  if (result.created) deps.logger?.info({ operatorId: result.operatorId }, 'first administrator created from ADMIN_IDENTIFIER');
  else if (result.reason === 'identifier_taken') deps.logger?.warn('ADMIN_IDENTIFIER is taken by an operator, and no active administrator exists: use npm run create-admin');
  return result;
}
