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
import type { Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';
import type { Logger } from '../../platform/logger.js';
import type { Operator, OperatorRole, OperatorStatus } from '../../models/index.js';
import { AuditEventsRepository } from '../../platform/events/audit.js';
import { UnitOfWork, type Tx } from '../../platform/database/unit-of-work.js';
import { isUniqueViolation } from '../../platform/database/unit-of-work.js';
import { OperatorsRepository, SessionsRepository, type OperatorFilter } from '../sign-in/index.js';
import { SearchLogsRepository } from '../verification/index.js';
import { hashPassword, temporaryPassword } from '../sign-in/index.js';
import { pageOf, type Page, type PageRequest } from '../../platform/lists/paging.js';

export interface OperatorDeps {
  unitOfWork: UnitOfWork;
  auditEvents: AuditEventsRepository;
  operators: OperatorsRepository;
  sessionRows: SessionsRepository;
  searchLogs: SearchLogsRepository;
  logger?: Logger;
}

/** Who acts: an administrator through the API, or the system (start-up, `npm run create-admin`). */
export type Actor = { type: 'operator'; id: string } | { type: 'system'; id?: null };

export type PublicOperator = ReturnType<Operator['toPublic']>;

export const IDENTIFIER_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._@+-]{2,63}$';
export const ORG_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const notFound = () => new AppError('not_found', 'Operator not found');

function auditActor(actor: Actor) {
  return { actorType: actor.type, actorId: actor.type === 'operator' ? actor.id : null } as const;
}

export interface NewOperator {
  identifier: string;
  displayName: string;
  role?: OperatorRole;
  orgId?: string;
}

export interface OperatorPatch {
  displayName?: string;
  role?: OperatorRole;
  status?: OperatorStatus;
}

export class OperatorService {
  constructor(private readonly deps: OperatorDeps) {}

  private async findForUpdate(trx: Tx, id: string): Promise<Operator> {
    const op = UUID.test(id) ? await this.deps.operators.findForUpdate(id, trx) : undefined;
    if (!op) throw notFound();
    return op;
  }

  /**
   * Creates an operator. Without `password`, a temporary one is generated, returned once, and the
   * account is flagged (must set its own password first). 409 `conflict` when the identifier is taken
   * (compared case-insensitively).
   */
  async create(
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
      const operator = await this.deps.unitOfWork.run(async (trx) => {
        const row = await this.deps.operators.insert(
          {
            identifier: input.identifier,
            displayName: input.displayName,
            role: input.role ?? 'operator',
            status: 'active',
            mustResetPassword: temp !== null,
            passwordHash,
            orgId: input.orgId ?? 'default',
            createdBy: actor.type === 'operator' ? actor.id : null,
          },
          trx,
        );
        await this.deps.auditEvents.record(
          {
            type: 'operator.created',
            ...auditActor(actor),
            subjectType: 'operator',
            subjectId: row.id,
            data: { identifier: row.identifier, role: row.role, orgId: row.orgId, ...(opts.via ? { via: opts.via } : {}) },
          },
          trx,
        );
        return row;
      });
      return { operator, temporaryPassword: temp };
    } catch (e) {
      if (isUniqueViolation(e)) throw new AppError('conflict', 'This identifier is already taken');
      throw e;
    }
  }

  /** GET /operators: a page of operators, newest first (never a password hash). */
  async list(filter: OperatorFilter): Promise<Page<PublicOperator>> {
    const { rows, total } = await this.deps.operators.list(filter);
    return pageOf(
      rows.map((o) => o.toPublic()),
      filter,
      total,
    );
  }

  async get(id: string): Promise<Operator> {
    const op = UUID.test(id) ? await this.deps.operators.find(id) : undefined;
    if (!op) throw notFound();
    return op;
  }

  /**
   * PATCH /operators/{id} (and DELETE, as `{ status: 'deactivated' }`). Unchanged values are no-ops.
   * Deactivation revokes every session of the operator; reactivation does not bring them back.
   */
  async update(id: string, patch: OperatorPatch, actor: Actor): Promise<Operator> {
    const { operators, sessionRows } = this.deps;
    return this.deps.unitOfWork.run(async (trx) => {
      if (patch.role !== undefined || patch.status !== undefined) await operators.lockAdministrators(trx);
      const op = await this.findForUpdate(trx, id);
      const changes: OperatorPatch = {};
      if (patch.displayName !== undefined && patch.displayName !== op.displayName) changes.displayName = patch.displayName;
      if (patch.role !== undefined && patch.role !== op.role) changes.role = patch.role;
      if (patch.status !== undefined && patch.status !== op.status) changes.status = patch.status;
      if (Object.keys(changes).length === 0) return op;

      const wasManagingAdmin = op.role === 'administrator' && op.status === 'active';
      const staysManagingAdmin = (changes.role ?? op.role) === 'administrator' && (changes.status ?? op.status) === 'active';
      if (wasManagingAdmin && !staysManagingAdmin && (await operators.otherManagingAdministrators(op.id, trx)) === 0) {
        throw new AppError('conflict', 'This is the last active administrator: promote or unlock another administrator first');
      }

      const updated = (await operators.update(op.id, changes, {}, trx))!;
      const subject = { subjectType: 'operator', subjectId: op.id, ...auditActor(actor) };
      if (changes.role) {
        await this.deps.auditEvents.record({ type: 'operator.role_changed', ...subject, data: { from: op.role, to: changes.role } }, trx);
      }
      if (changes.status) {
        const revoked = changes.status === 'deactivated' ? await sessionRows.revokeAllOf({ type: 'operator', id: op.id }, 'operator_deactivated', {}, trx) : 0;
        await this.deps.auditEvents.record(
          changes.status === 'deactivated'
            ? {
                type: 'operator.deactivated',
                ...subject,
                data: { from: op.status, to: 'deactivated', sessionsRevoked: revoked },
                public: { operatorId: op.id },
              }
            : { type: 'operator.reactivated', ...subject, data: { from: op.status, to: changes.status, sessionsRevoked: revoked } },
          trx,
        );
      }
      if (changes.displayName) {
        await this.deps.auditEvents.record({ type: 'operator.display_name_changed', ...subject, data: {} }, trx);
      }
      return updated;
    });
  }

  /** DELETE /operators/{id}: deactivation, never a hard delete (SearchLog and AuditEvent history stay). */
  deactivate(id: string, actor: Actor): Promise<Operator> {
    return this.update(id, { status: 'deactivated' }, actor);
  }

  /**
   * POST /operators/{id}/reset-password, the only password reset there is: a fresh temporary password,
   * flagged, unlocked, the failure counter cleared, and every session of the operator revoked.
   */
  async resetPassword(id: string, actor: Actor): Promise<{ temporaryPassword: string; mustResetPassword: true }> {
    if (!UUID.test(id)) throw notFound();
    const temp = temporaryPassword();
    const passwordHash = await hashPassword(temp);
    await this.deps.unitOfWork.run(async (trx) => {
      const op = await this.findForUpdate(trx, id);
      await this.deps.operators.update(id, { passwordHash, mustResetPassword: true, failedLoginCount: 0, lockedAt: null, lockedUntil: null }, {}, trx);
      const revoked = await this.deps.sessionRows.revokeAllOf({ type: 'operator', id }, 'password_reset', {}, trx);
      await this.deps.auditEvents.record(
        {
          type: 'operator.password_reset',
          ...auditActor(actor),
          subjectType: 'operator',
          subjectId: id,
          data: { wasLocked: op.isLockedNow(), sessionsRevoked: revoked },
        },
        trx,
      );
    });
    return { temporaryPassword: temp, mustResetPassword: true };
  }

  /** GET /operators/{id}/sessions: full SearchLog rows of the operator's /identify calls, newest first. */
  async searchLogs(id: string, page: PageRequest): Promise<Page<Record<string, unknown>>> {
    await this.get(id);
    const { rows, total } = await this.deps.searchLogs.operatorIdentifyPage(id, page.page, page.pageSize);
    const items = rows.map((r) => ({ referenceId: r.id, ...r }));
    return pageOf(items, page, total);
  }

  /**
   * The first administrator of a deployment, from ADMIN_IDENTIFIER / ADMIN_PASSWORD: created when no
   * active administrator exists, with the password the environment gives (so not flagged). Does nothing
   * when unset, when an active administrator exists, or when the identifier is taken (logged). Safe to
   * call from several processes at once. Called by the web process at start-up (processes/web.ts).
   */
  async ensureFirstAdministrator(config: Pick<Config, 'operators'>): Promise<{ created: boolean; operatorId?: string; reason?: string }> {
    const { operators, logger } = this.deps;
    const {
      operators: { adminIdentifier: identifier, adminPassword: password },
    } = config;
    if (!identifier || !password) return { created: false, reason: 'not_configured' };
    if (password.length < 8) throw new Error('ADMIN_PASSWORD must have at least 8 characters');
    // Hash outside the transaction: it takes tens of milliseconds and holds no lock.
    const passwordHash = await hashPassword(password);
    const result = await this.deps.unitOfWork.run(async (trx) => {
      await operators.lockAdministrators(trx);
      if (await operators.activeAdministratorExists(trx)) return { created: false, reason: 'administrator_exists' };
      if (await operators.findByIdentifier(identifier, trx)) return { created: false, reason: 'identifier_taken' };
      const row = await operators.insert(
        { identifier, displayName: identifier, role: 'administrator', status: 'active', mustResetPassword: false, passwordHash },
        trx,
      );
      await this.deps.auditEvents.record(
        {
          type: 'operator.created',
          actorType: 'system',
          actorId: null,
          subjectType: 'operator',
          subjectId: row.id,
          data: { identifier, role: 'administrator', orgId: 'default', via: 'ADMIN_IDENTIFIER' },
        },
        trx,
      );
      return { created: true, operatorId: row.id as string };
    });
    if (result.created) logger?.info({ operatorId: result.operatorId }, 'first administrator created from ADMIN_IDENTIFIER');
    else if (result.reason === 'identifier_taken')
      logger?.warn('ADMIN_IDENTIFIER is taken by an operator, and no active administrator exists: use npm run create-admin');
    return result;
  }
}

/** The operator service over a bare knex: for scripts and start-up outside the web process's graph. */
export function operatorServiceOn(db: Knex, logger?: Logger): OperatorService {
  return new OperatorService({
    unitOfWork: new UnitOfWork(db),
    auditEvents: new AuditEventsRepository(db),
    operators: new OperatorsRepository(db),
    sessionRows: new SessionsRepository(db),
    searchLogs: new SearchLogsRepository(db),
    logger,
  });
}

/**
 * The first administrator of a deployment (see OperatorService.ensureFirstAdministrator), for the web
 * entry file and the tests, which hold the process's deps.
 */
export const ensureFirstAdministrator = (deps: { db: Knex; logger?: Logger; config: Pick<Config, 'operators'> }) =>
  operatorServiceOn(deps.db, deps.logger).ensureFirstAdministrator(deps.config);
