/**
 * The consumer's own record: read it, change the phone (applied at once) or the BVN-linked bankAccount
 * (pending until the simulated upstream confirmation lands), and delete it.
 *
 * PATCH and DELETE need a fresh proofToken (api/services/proof-tokens.ts). Everything that can be
 * refused without side effects (the body, the phone's form, a phone taken by another account) is
 * checked BEFORE the token is consumed, so a mistake does not cost the consumer a new selfie.
 */
import type { Knex } from 'knex';
import { AppError } from '../../shared/errors.js';
import { UPSTREAM_QUEUE, enqueueBankAccountConfirm } from '../../shared/jobs/upstream.js';
import type { AppDeps } from '../deps.js';
import { validationError } from '../validation.js';
import { maskTail, recordAudit } from './audit-events.js';
import { removeCanonical } from './embedding-store.js';
import { requirePhone } from './phone.js';
import { consumeProofToken } from './proof-tokens.js';

export type UserDeps = Pick<AppDeps, 'config' | 'db' | 'redis' | 'keys' | 'jobs' | 'logger'>;

export interface UserView {
  id: string;
  phone: string;
  name: string | null;
  dateOfBirth: string | null;
  gender: string | null;
  bankAccount: string | null;
  pendingBankAccount: string | null;
  ninLinked: boolean;
  bvnLinked: boolean;
  createdAt: string;
}

export interface UserChange {
  proofToken: string;
  phone?: string;
  bankAccount?: string;
}

const UNIQUE_VIOLATION = '23505';

async function loadView(db: Knex | Knex.Transaction, userId: string): Promise<UserView | null> {
  const row = await db('users as u')
    .where('u.id', userId)
    .whereNull('u.deletedAt')
    .first(
      'u.id',
      'u.phone',
      'u.name',
      'u.dateOfBirth',
      'u.gender',
      'u.bankAccount',
      'u.pendingBankAccount',
      'u.createdAt',
      db.raw('EXISTS (SELECT 1 FROM nin_links n WHERE n.user_id = u.id) AS nin_linked'),
      db.raw('EXISTS (SELECT 1 FROM bvn_links b WHERE b.user_id = u.id) AS bvn_linked'),
    );
  if (!row) return null;
  return {
    id: row.id,
    phone: row.phone,
    name: row.name ?? null,
    dateOfBirth: row.dateOfBirth ?? null,
    gender: row.gender ?? null,
    bankAccount: row.bankAccount ?? null,
    pendingBankAccount: row.pendingBankAccount ?? null,
    ninLinked: Boolean(row.ninLinked),
    bvnLinked: Boolean(row.bvnLinked),
    createdAt: new Date(row.createdAt).toISOString(),
  };
}

export async function getUser(deps: Pick<UserDeps, 'db'>, userId: string): Promise<UserView> {
  const view = await loadView(deps.db, userId);
  if (!view) throw new AppError('not_found', 'User not found');
  return view;
}

async function phoneTakenByAnother(db: Knex | Knex.Transaction, phone: string, userId: string): Promise<boolean> {
  const other = await db('users').where({ phone }).whereNull('deletedAt').whereNot('id', userId).first('id');
  return Boolean(other);
}

/**
 * PATCH /users/{id}. Returns `applied` for a phone change alone and `pending_upstream` whenever a
 * bankAccount change is part of the request (the phone part, if any, is applied at once).
 */
export async function updateUser(
  deps: UserDeps,
  userId: string,
  change: UserChange,
): Promise<{ status: 'applied' | 'pending_upstream'; user: UserView }> {
  // 1. Everything refusable without side effects, before the token is spent.
  if (change.phone === undefined && change.bankAccount === undefined) {
    throw validationError([{ in: 'body', path: '/', message: 'must contain phone or bankAccount (or both)' }]);
  }
  // The same normal form as OTP sign-in (E.164, Nigerian local forms accepted), else 400.
  const phone = change.phone !== undefined ? requirePhone(change.phone) : undefined;
  const current = await deps.db('users').where({ id: userId }).whereNull('deletedAt').first('phone', 'bankAccount');
  if (!current) throw new AppError('not_found', 'User not found');
  const phoneChanges = phone !== undefined && phone !== current.phone;
  if (phoneChanges && (await phoneTakenByAnother(deps.db, phone!, userId))) {
    throw new AppError('conflict', 'This phone number belongs to another account');
  }

  // 2. The proof: exactly one request can spend a token.
  await consumeProofToken(deps, userId, change.proofToken);

  // 3. The change and its audit row, together.
  const requestedAt = change.bankAccount !== undefined ? new Date() : null;
  try {
    await deps.db.transaction(async (trx) => {
      const patch: Record<string, unknown> = { updatedAt: trx.fn.now() };
      if (phoneChanges) patch.phone = phone;
      if (requestedAt) {
        patch.pendingBankAccount = change.bankAccount;
        patch.pendingBankAccountRequestedAt = requestedAt;
      }
      const updated = await trx('users').where({ id: userId }).whereNull('deletedAt').update(patch).returning(['id']);
      if (updated.length === 0) throw new AppError('not_found', 'User not found');
      const fields = [...(phone !== undefined ? ['phone'] : []), ...(requestedAt ? ['bankAccount'] : [])];
      await recordAudit(trx, {
        type: 'profile.changed',
        actorType: 'consumer',
        actorId: userId,
        subjectType: 'user',
        subjectId: userId,
        data: {
          fields,
          ...(phone !== undefined ? { phone: { from: maskTail(current.phone), to: maskTail(phone), applied: true } } : {}),
          ...(requestedAt
            ? { bankAccount: { from: maskTail(current.bankAccount), to: maskTail(change.bankAccount), status: 'pending_upstream', requestedAt: requestedAt.toISOString() } }
            : {}),
        },
      });
    });
  } catch (e) {
    // Two accounts racing for one number: the partial unique index decides.
    if ((e as { code?: string }).code === UNIQUE_VIOLATION) throw new AppError('conflict', 'This phone number belongs to another account');
    throw e;
  }

  // 4. The delayed upstream confirmation. If Redis refuses now, the worker's repair sweep re-enqueues it.
  if (requestedAt) {
    try {
      await enqueueBankAccountConfirm(deps.jobs.queue(UPSTREAM_QUEUE), userId, requestedAt, deps.config.bankAccountConfirmDelayMs);
    } catch (e) {
      deps.logger.warn({ userId, err: (e as Error).message }, 'bankAccount confirmation not enqueued; the repair sweep will retry');
    }
  }

  const user = await loadView(deps.db, userId);
  if (!user) throw new AppError('not_found', 'User not found');
  return { status: requestedAt ? 'pending_upstream' : 'applied', user };
}

/**
 * DELETE /users/{id}: the embedding leaves the vector index FIRST (removeCanonical deletes the row and
 * appends to the change log that every search replica applies before its next search), THEN the
 * relational soft-delete, which also ends every refresh token of the user's sessions. If the second
 * step failed, the account would be live but unsearchable, never deleted but searchable.
 *
 * The sessions themselves stay un-revoked on purpose: the authorisation layer answers a deleted
 * user's still-valid access token with 404 `not_found` (interface document), not 401.
 */
export async function deleteUser(deps: UserDeps, userId: string, proofToken: string): Promise<{ status: 'deleted' }> {
  await consumeProofToken(deps, userId, proofToken);

  await removeCanonical(deps.db, userId);

  await deps.db.transaction(async (trx) => {
    const deleted = await trx('users')
      .where({ id: userId })
      .whereNull('deletedAt')
      .update({ deletedAt: trx.fn.now(), updatedAt: trx.fn.now(), pendingBankAccount: null, pendingBankAccountRequestedAt: null })
      .returning(['id']);
    if (deleted.length === 0) throw new AppError('not_found', 'User not found');
    const sessionIds = trx('sessions').where({ subjectType: 'consumer', subjectId: userId }).select('id');
    const revoked = await trx('refreshTokens')
      .whereIn('sessionId', sessionIds)
      .where('expiresAt', '>', trx.fn.now())
      .update({ expiresAt: trx.fn.now() });
    await recordAudit(trx, {
      type: 'profile.deleted',
      actorType: 'consumer',
      actorId: userId,
      subjectType: 'user',
      subjectId: userId,
      data: { embeddingRemoved: true, refreshTokensRevoked: revoked },
    });
  });
  return { status: 'deleted' };
}
