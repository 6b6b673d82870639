/**
 * The right of access (NDPA 2023 s.34; docs/data-protection.md): everything the service holds about a
 * consumer, machine-readable, in one JSON document: the profile, the links with masked numbers and the
 * registry record they were made with, the preferences, the whole history, the disputes, and what is
 * held about the face (whether a template is enrolled, from which source, when). Never a template, a
 * photo, a full NIN/BVN or a token.
 */
import type { EmbeddingsRepository } from '../face/index.js';
import type { SearchLogsRepository } from '../verification/index.js';
import type { UsersRepository } from '../users/index.js';
import { maskTail } from '../../platform/events/audit.js';
import type { HistoryItem, HistoryService } from '../verification/index.js';
import type { PreferencesService } from './preferences-service.js';
import type { UserService, UserView } from './user-service.js';

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
      userService: UserService;
      users: UsersRepository;
      embeddings: EmbeddingsRepository;
      searchLogs: SearchLogsRepository;
      history: HistoryService;
      preferences: PreferencesService;
    },
  ) {}

  async export(userId: string): Promise<DataExport> {
    const { users, embeddings, searchLogs } = this.deps;
    const profile = await this.deps.userService.get(userId); // 404 for a deleted user
    const history: HistoryItem[] = [];
    for await (const item of this.deps.history.iterate(userId)) history.push(item);
    const template = await embeddings.describe(userId);
    return {
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
  }
}
