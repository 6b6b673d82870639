/**
 * The consumer's own record: read it, change the phone (applied at once) or the BVN-linked bankAccount
 * (pending until the simulated upstream confirmation lands), and delete it.
 *
 * PATCH and DELETE need a fresh proofToken (features/verification/proof-tokens.ts). The body and the
 * phone's form are checked BEFORE the token is consumed, so a mistake does not cost the consumer a new
 * selfie; a phone held by another account is checked only AFTER it (SPEC 13.3: otherwise any consumer
 * could ask which numbers hold an account), and that refusal gives the token back.
 */
import type { Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';
import type { JobClient } from '../../platform/face-path/job-client.js';
import { BANK_ACCOUNT_QUEUE, enqueueBankAccountConfirm } from './job.js';
import type { Logger } from '../../platform/logger.js';
import { maskTail, type AuditEventsRepository } from '../../platform/events/audit.js';
import type { UnitOfWork } from '../../platform/database/unit-of-work.js';
import type { EmbeddingsRepository } from '../face/index.js';
import type { ErasuresRepository } from './erasures-repository.js';
import type { RetentionRegistry } from '../../platform/retention/registry.js';
import { isUniqueViolation } from '../../platform/database/unit-of-work.js';
import type { SessionsRepository } from '../sign-in/index.js';
import type { UserRow, UsersRepository } from '../users/index.js';
import { validationError } from '../../platform/http/validation.js';
import { requirePhone, requireSmsCountry, smsAllowedTo } from '../../platform/phone.js';
import { parseCountryCodes } from '../../platform/config.js';
import type { ProofTokens } from '../verification/index.js';
import { phoneChangeNotices } from './phone-change-notice.js';
import type { SmsTransport } from '../../platform/sms.js';

export interface UserDeps {
  config: Pick<Config, 'identity' | 'otp'>;
  unitOfWork: UnitOfWork;
  auditEvents: AuditEventsRepository;
  users: UsersRepository;
  sessionRows: SessionsRepository;
  embeddings: EmbeddingsRepository;
  erasures: ErasuresRepository;
  /** Every wing's eraser (platform/retention/registry.ts): the user's rows in the DELETE's transaction, then the copies outside PostgreSQL. */
  erasure: Pick<RetentionRegistry, 'eraseInTransaction' | 'eraseAfterCommit'>;
  proofTokens: ProofTokens;
  jobs: JobClient;
  logger: Logger;
  /** Notices of a phone change go to the old and the new number. */
  sms: SmsTransport;
}

/** The profile as the API answers it: the repository's row with the instant as an ISO string. */
export type UserView = Omit<UserRow, 'createdAt'> & { createdAt: string };

export interface UserChange {
  proofToken: string;
  phone?: string;
  bankAccount?: string;
}

function toView(row: UserRow): UserView {
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

const notFound = () => new AppError('not_found', 'User not found');

export class UserService {
  /** OTP_ALLOWED_COUNTRY_CODES: a phone change only to, and notices only to, numbers of these countries. */
  private readonly smsCountries: readonly string[];

  constructor(private readonly deps: UserDeps) {
    this.smsCountries = parseCountryCodes(String(deps.config.otp.allowedCountryCodes)) ?? ['234'];
  }

  async get(userId: string): Promise<UserView> {
    const row = await this.deps.users.findLiveView(userId);
    if (!row) throw notFound();
    return toView(row);
  }

  /**
   * PATCH /users/{id}. Returns `applied` for a phone change alone and `pending_upstream` whenever a
   * bankAccount change is part of the request (the phone part, if any, is applied at once).
   */
  async update(userId: string, change: UserChange, sessionId: string): Promise<{ status: 'applied' | 'pending_upstream'; user: UserView }> {
    // 1. Everything refusable without side effects, before the token is spent.
    if (change.phone === undefined && change.bankAccount === undefined) {
      throw validationError([{ in: 'body', path: '/', message: 'must contain phone or bankAccount (or both)' }]);
    }
    // The same normal form as OTP sign-in (E.164, Nigerian local forms accepted), else 400; and, as
    // there, a number of OTP_ALLOWED_COUNTRY_CODES (400 `phone_not_supported`): the change sends SMS to it.
    const phone = change.phone !== undefined ? requireSmsCountry(requirePhone(change.phone), this.smsCountries) : undefined;
    const { users } = this.deps;
    const current = await users.findLive(userId);
    if (!current) throw notFound();
    const phoneChanges = phone !== undefined && phone !== current.phone;

    // 2. The proof: exactly one request can spend a token, and it is spent whatever is answered next.
    //    Only after it is a number held by another account named (409): without the proof, the answer
    //    must not tell who has an account; and as a 409 costs the proof, one selfie buys one such
    //    answer, not a probe of every number.
    await this.deps.proofTokens.consume(userId, sessionId, change.proofToken);
    const phoneTaken = () => new AppError('conflict', 'This phone number belongs to another account');
    if (phoneChanges && (await users.phoneTakenByAnother(phone!, userId))) throw phoneTaken();

    // 3. The change and its audit row, together; a new phone also ends every other session (whoever
    //    held one, with the old number, is out).
    let otherSessionsRevoked = 0;
    const requestedAt = change.bankAccount !== undefined ? new Date() : null;
    try {
      await this.deps.unitOfWork.run(async (trx) => {
        const updated = await users.updateLive(
          userId,
          {
            ...(phoneChanges ? { phone } : {}),
            ...(requestedAt ? { pendingBankAccount: change.bankAccount, pendingBankAccountRequestedAt: requestedAt } : {}),
          },
          trx,
        );
        if (!updated) throw notFound();
        if (phoneChanges)
          otherSessionsRevoked = await this.deps.sessionRows.revokeAllOf(
            { type: 'consumer', id: userId },
            'phone_changed',
            { exceptSessionId: sessionId },
            trx,
          );
        const fields = [...(phone !== undefined ? ['phone'] : []), ...(requestedAt ? ['bankAccount'] : [])];
        await this.deps.auditEvents.record(
          {
            type: 'profile.changed',
            actorType: 'consumer',
            actorId: userId,
            subjectType: 'user',
            subjectId: userId,
            data: {
              fields,
              ...(phone !== undefined ? { phone: { from: maskTail(current.phone), to: maskTail(phone), applied: true }, otherSessionsRevoked } : {}),
              ...(requestedAt
                ? {
                    bankAccount: {
                      from: maskTail(current.bankAccount),
                      to: maskTail(change.bankAccount),
                      status: 'pending_upstream',
                      requestedAt: requestedAt.toISOString(),
                    },
                  }
                : {}),
            },
          },
          trx,
        );
      });
    } catch (e) {
      // Two accounts racing for one number: the partial unique index decides.
      if (isUniqueViolation(e)) throw phoneTaken();
      throw e;
    }

    // 4. The owner hears of a phone change on both numbers (a SIM swap shows on the old one). Sent after
    //    the commit; a failed notice is logged, the change stands.
    if (phoneChanges) {
      await Promise.all(
        // An old number outside OTP_ALLOWED_COUNTRY_CODES (kept from before the setting) gets no SMS.
        phoneChangeNotices(current.phone, phone!)
          .filter((n) => smsAllowedTo(n.to, this.smsCountries))
          .map((n) =>
            this.deps.sms
              .sendNotice(n.to, n.message)
              .catch((e: unknown) => this.deps.logger.warn({ userId, err: (e as Error).message }, 'phone change notice not sent')),
          ),
      );
    }

    // 5. The delayed upstream confirmation. If Redis refuses now, the worker's repair sweep re-enqueues it.
    if (requestedAt) {
      try {
        await enqueueBankAccountConfirm(this.deps.jobs.queue(BANK_ACCOUNT_QUEUE), userId, requestedAt, this.deps.config.identity.bankAccountConfirmDelayMs);
      } catch (e) {
        this.deps.logger.warn({ userId, err: (e as Error).message }, 'bankAccount confirmation not enqueued; the repair sweep will retry');
      }
    }

    return { status: requestedAt ? 'pending_upstream' : 'applied', user: await this.get(userId) };
  }

  /**
   * DELETE /users/{id}: in ONE transaction, the embedding leaves the vector index (the row is deleted
   * and a `delete` appended to the change log that every search replica applies before its next
   * search) and the relational soft-delete, which also ends every refresh token of the user's sessions.
   * Both or neither: when PostgreSQL went away between two separate steps, the account stayed live but
   * without its canonical embedding, so /verify/self answered 409 and no proofToken could retry the
   * deletion (found by the fault suite's PostgreSQL restart; test/accounts/users.test.ts). Once the answer is
   * sent, the change is committed, so no search that starts afterwards returns the user.
   *
   * The sessions themselves stay un-revoked on purpose: the authorisation layer answers a deleted
   * user's still-valid access token with 404 `not_found` (interface document), not 401.
   */
  async delete(userId: string, proofToken: string, sessionId: string): Promise<{ status: 'deleted' }> {
    const { users, sessionRows, embeddings, erasures } = this.deps;
    await this.deps.proofTokens.consume(userId, sessionId, proofToken);

    // The phone keys the sign-in codes in Redis: read (under the row's lock) as it is erased.
    const { phone } = await this.deps.unitOfWork.run(async (trx) => {
      const erased = await users.softDelete(userId, trx);
      if (!erased) throw notFound();
      const revoked = await sessionRows.expireRefreshTokensOf({ type: 'consumer', id: userId }, trx);
      await this.deps.auditEvents.record(
        {
          type: 'user.deleted',
          actorType: 'consumer',
          actorId: userId,
          subjectType: 'user',
          subjectId: userId,
          data: { embeddingRemoved: true, refreshTokensRevoked: revoked },
          public: { userId },
        },
        trx,
      );
      // Every other wing's rows of the user (e.g. the live captures of duplicate-identity cases).
      await this.deps.erasure.eraseInTransaction(userId, trx);
      // Last: the change-log lock is held until the transaction ends.
      const { seq } = await embeddings.remove(userId, trx);
      await erasures.begin(userId, seq, trx);
      return erased;
    });
    // The copies outside PostgreSQL: Redis now (every after-commit eraser); the search snapshots are
    // rewritten by the search workers within ERASURE_MAX_SECONDS, and the last of them writes the
    // receipt (`user.erased`). A failure here leaves the erasure pending: the retention sweep finishes it.
    try {
      await this.deps.erasure.eraseAfterCommit({ userId, phone });
      await erasures.markAfterCommitDone(userId);
      await erasures.completeCovered();
    } catch (e) {
      this.deps.logger.warn({ userId, err: (e as Error).message }, 'erasure: Redis purge deferred to the sweep');
    }
    return { status: 'deleted' };
  }
}
