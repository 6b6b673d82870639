/**
 * The right of access (NDPA 2023 s.34; docs/data-protection.md): everything the service holds about a
 * consumer, machine-readable, in one JSON document: the profile, the links with masked numbers and the
 * registry record they were made with, the preferences, the whole history, the disputes, and what is
 * held about the face (whether a template is enrolled, from which source, when). Never a template, a
 * photo, a full NIN/BVN or a token.
 *
 * Whoever holds a session can take it, so an export is also what a stolen session is most likely to be
 * used for: each one sends an SMS notice to the account's phone (the owner hears of it, as of a phone
 * change), and at most EXPORTS_PER_DAY are served per consumer in a 24-hour window (429 `rate_limited`).
 */
import type { EmbeddingsRepository } from '../face/index.js';
import type { SearchLogsRepository } from '../verification/index.js';
import type { ProofTokens } from '../verification/index.js';
import type { UsersRepository } from '../users/index.js';
import { maskTail, type AuditEventsRepository } from '../../platform/events/audit.js';
import type { HistoryItem, HistoryService } from '../verification/index.js';
import type { PreferencesService } from './preferences-service.js';
import type { UserService, UserView } from './user-service.js';
import type { Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';
import type { Logger } from '../../platform/logger.js';
import type { KeySpace, Redis } from '../../platform/redis/redis.js';
import { countInWindow, DAY_MS } from '../../platform/redis/window-counter.js';
import type { SmsTransport } from '../../platform/sms.js';

/** The SMS an export sends to the account's phone. */
export const EXPORT_NOTICE =
  'faceid: a copy of all the data held about your account was just downloaded. If this was not you, sign in and sign out your other sessions, and contact support now.';

export interface DataExport {
  exportedAt: string;
  profile: UserView;
  links: {
    registry: 'nin' | 'bvn';
    number: string | null;
    linkedAt: string;
    deviceHint: string | null;
    crossRegistryFlagged: boolean;
    registryRecord: { firstName: string; middleName: string | null; lastName: string; dateOfBirth: string; gender: string } | null;
  }[];
  preferences: Awaited<ReturnType<PreferencesService['get']>>;
  history: HistoryItem[];
  disputes: {
    id: string;
    referenceId: string;
    kind: 'identify' | 'verify_self';
    reason: string | null;
    status: string;
    note: string | null;
    createdAt: string;
    updatedAt: string;
  }[];
  biometric: {
    templateEnrolled: boolean;
    source: string | null;
    engineVersion: string | null;
    qualityScore: number | null;
    updatedAt: string | null;
    note: string;
  };
}

export class DataExportService {
  constructor(
    private readonly deps: {
      auditEvents: AuditEventsRepository;
      userService: UserService;
      users: UsersRepository;
      embeddings: EmbeddingsRepository;
      searchLogs: SearchLogsRepository;
      history: HistoryService;
      preferences: PreferencesService;
      config: Pick<Config, 'identity'>;
      redis: Redis;
      keys: KeySpace;
      proofTokens: ProofTokens;
      sms: SmsTransport;
      logger: Logger;
    },
  ) {}

  /**
   * Everything held about the user. Step-up first: the export is the whole account in one answer, so a
   * stolen session alone must not get it; the proofToken is spent whatever follows (a 429 included).
   */
  async export(userId: string, sessionId: string, proofToken: string | undefined): Promise<DataExport> {
    const { users, embeddings, searchLogs, config } = this.deps;
    const profile = await this.deps.userService.get(userId); // 404 for a deleted user
    await this.deps.proofTokens.consume(userId, sessionId, proofToken);
    const { count, resetInSeconds } = await countInWindow(this.deps.redis, this.deps.keys('accounts', 'export-rate', userId), DAY_MS);
    if (count > config.identity.exportsPerDay) {
      throw new AppError('rate_limited', `At most ${config.identity.exportsPerDay} data exports per day; try again later`, { retryAfter: resetInSeconds });
    }
    // Sent before the data is served; a failed notice is logged (the owner's right of access stands).
    await this.deps.sms
      .sendNotice(profile.phone, EXPORT_NOTICE)
      .catch((e: unknown) => this.deps.logger.warn({ userId, err: (e as Error).message }, 'export notice not sent'));
    const history: HistoryItem[] = [];
    for await (const item of this.deps.history.iterate(userId)) history.push(item);
    const template = await embeddings.describe(userId);
    const exported: DataExport = {
      exportedAt: new Date().toISOString(),
      profile,
      links: (await users.linksOf(userId)).map((l) => ({
        registry: l.registry,
        number: maskTail(l.number, 3),
        linkedAt: new Date(l.linkedAt).toISOString(),
        deviceHint: l.deviceHint,
        crossRegistryFlagged: l.crossRegistryFlagged,
        registryRecord: l.registryRecord
          ? {
              firstName: l.registryRecord.firstName,
              middleName: l.registryRecord.middleName ?? null,
              lastName: l.registryRecord.lastName,
              dateOfBirth: l.registryRecord.dateOfBirth,
              gender: l.registryRecord.gender,
            }
          : null,
      })),
      preferences: await this.deps.preferences.get(userId),
      history,
      disputes: (await searchLogs.disputesOf(userId)).map((d) => ({
        id: d.id,
        referenceId: d.searchLogId,
        kind: d.kind,
        reason: d.reason ?? null,
        status: d.status,
        note: d.note ?? null,
        createdAt: new Date(d.createdAt).toISOString(),
        updatedAt: new Date(d.updatedAt).toISOString(),
      })),
      biometric: {
        templateEnrolled: Boolean(template),
        source: template?.source ?? null,
        engineVersion: template?.engineVersion ?? null,
        qualityScore: template?.qualityScore ?? null,
        updatedAt: template ? new Date(template.updatedAt).toISOString() : null,
        note: 'The face template itself is never exported: it is encrypted at rest and only compared inside the service.',
      },
    };
    // A security event (SPEC 13.3): whoever holds the session took everything; the owner's trail shows when and from where.
    await this.deps.auditEvents.record({
      type: 'user.exported',
      actorType: 'consumer',
      actorId: userId,
      subjectType: 'user',
      subjectId: userId,
      data: { sections: Object.keys(exported).filter((k) => k !== 'exportedAt') },
    });
    return exported;
  }
}
