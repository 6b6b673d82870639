/**
 * objection models, one per table (migrations/ holds the schema). Columns are camelCase here and
 * snake_case in PostgreSQL (knexSnakeCaseMappers in platform/database/db.ts).
 */
import { Model } from 'objection';

abstract class BaseModel extends Model {
  // Timestamps arrive as Date objects; JSON renders them as ISO strings.
}

export class User extends BaseModel {
  static override tableName = 'users';
  id!: string;
  phone!: string;
  name!: string | null;
  dateOfBirth!: string | null;
  gender!: string | null;
  bankAccount!: string | null;
  pendingBankAccount!: string | null;
  pendingBankAccountRequestedAt!: Date | null;
  createdAt!: Date;
  updatedAt!: Date;
  deletedAt!: Date | null;
}

abstract class RegistryLink extends BaseModel {
  id!: string;
  userId!: string;
  registryRecord!: RegistryRecordSnapshot;
  deviceHint!: string | null;
  matchScore!: number | null;
  crossRegistryFlagged!: boolean;
  linkedAt!: Date;
}

export interface RegistryRecordSnapshot {
  firstName: string;
  lastName: string;
  middleName?: string | null;
  dateOfBirth: string;
  gender: string;
}

export class NinLink extends RegistryLink {
  static override tableName = 'nin_links';
  nin!: string;
}

export class BvnLink extends RegistryLink {
  static override tableName = 'bvn_links';
  bvn!: string;
}

export class CanonicalEmbedding extends BaseModel {
  static override tableName = 'canonical_embeddings';
  static override idColumn = 'userId';
  userId!: string;
  /** A key-ring blob (AES-256-GCM, the user id as associated data), never the template in clear. */
  embedding!: Buffer;
  /** The key that sealed `embedding` (a rotation re-encrypts the rows of other keys). */
  keyId!: string;
  source!: 'link_nin' | 'link_bvn' | 'verify_self';
  engineVersion!: string;
  /** Capture quality (0..100) of the capture behind this embedding; null before migration 20261123. */
  qualityScore!: number | null;
  updatedAt!: Date;
}

export class EmbeddingChange extends BaseModel {
  static override tableName = 'embedding_changes';
  static override idColumn = 'seq';
  seq!: string; // bigint arrives as a string
  userId!: string;
  op!: 'upsert' | 'delete';
  createdAt!: Date;
}

export type OperatorRole = 'operator' | 'administrator';
export type OperatorStatus = 'active' | 'deactivated';

export class Operator extends BaseModel {
  static override tableName = 'operators';
  id!: string;
  identifier!: string;
  displayName!: string;
  role!: OperatorRole;
  status!: OperatorStatus;
  mustResetPassword!: boolean;
  passwordHash!: string;
  failedLoginCount!: number;
  lockedAt!: Date | null;
  /** When a lapsing (administrator's) lock ends; null with lockedAt set: locked until a reset. */
  lockedUntil!: Date | null;
  orgId!: string;
  createdBy!: string | null;
  createdAt!: Date;
  updatedAt!: Date;
  /** TOTP secret, sealed with the key ring (purpose totp-secrets, platform/keys); null until MFA is confirmed. */
  mfaSecret!: string | null;
  mfaPendingSecret!: string | null;
  mfaEnabledAt!: Date | null;
  mfaLastStep!: string | number | null;
  passwordSetAt!: Date;

  /** Locked at this moment: locked, and not a lapsing lock whose window has passed. */
  isLockedNow(now = Date.now()): boolean {
    return this.lockedAt !== null && (this.lockedUntil == null || new Date(this.lockedUntil).getTime() > now);
  }

  /** The public shape: never the password hash or the lock counters' internals. */
  toPublic() {
    return {
      id: this.id,
      identifier: this.identifier,
      displayName: this.displayName,
      role: this.role,
      status: this.status,
      mustResetPassword: this.mustResetPassword,
      locked: this.isLockedNow(),
      mfaEnabled: Boolean(this.mfaEnabledAt),
      orgId: this.orgId,
      createdAt: this.createdAt,
      updatedAt: this.updatedAt,
    };
  }
}

export class Session extends BaseModel {
  static override tableName = 'sessions';
  id!: string;
  subjectType!: 'consumer' | 'operator';
  subjectId!: string;
  deviceHint!: string | null;
  createdAt!: Date;
  revokedAt!: Date | null;
  revokedReason!: string | null;
}

export class RefreshToken extends BaseModel {
  static override tableName = 'refresh_tokens';
  id!: string;
  sessionId!: string;
  tokenHash!: string;
  createdAt!: Date;
  expiresAt!: Date;
  usedAt!: Date | null;
}

export interface Candidate {
  userId: string;
  score: number;
  rank: number;
}

export interface LatencyMs {
  liveness: number | null;
  embed: number | null;
  search: number | null;
  total: number;
}

export class SearchLog extends BaseModel {
  static override tableName = 'search_logs';
  id!: string;
  kind!: 'identify' | 'verify_self';
  operatorId!: string | null;
  orgId!: string | null;
  userId!: string | null;
  outcome!: string;
  candidates!: Candidate[];
  matchedUserIds!: string[];
  topScore!: number | null;
  latencyMs!: LatencyMs;
  engineVersion!: string | null;
  errorCode!: string | null;
  /** Capture quality (0..100) of the probe; null when no face was analysed. */
  qualityScore!: number | null;
  escalatedAt!: Date | null;
  escalatedBy!: string | null;
  createdAt!: Date;

  static override get jsonAttributes() {
    return ['candidates', 'latencyMs'];
  }
}

export type DisputeStatus = 'open' | 'investigating' | 'resolved' | 'rejected';

export class Dispute extends BaseModel {
  static override tableName = 'disputes';
  id!: string;
  searchLogId!: string;
  userId!: string;
  reason!: string | null;
  status!: DisputeStatus;
  note!: string | null;
  updatedBy!: string | null;
  createdAt!: Date;
  updatedAt!: Date;
}

export class AuditEvent extends BaseModel {
  static override tableName = 'audit_events';
  id!: string;
  type!: string;
  severity!: 'info' | 'high';
  actorType!: 'consumer' | 'operator' | 'system' | 'anonymous' | null;
  actorId!: string | null;
  subjectType!: string | null;
  subjectId!: string | null;
  data!: Record<string, unknown>;
  /** The client's address and user agent of the request that recorded the event (null outside a request). */
  ip!: string | null;
  userAgent!: string | null;
  createdAt!: Date;

  static override get jsonAttributes() {
    return ['data'];
  }
}

export class Preference extends BaseModel {
  static override tableName = 'preferences';
  static override idColumn = 'userId';
  userId!: string;
  notifyChannel!: 'sms' | 'none';
  language!: 'en' | 'ha' | 'ig' | 'yo' | 'pcm';
  marketingOptIn!: boolean;
  updatedAt!: Date;
}

export class RegistryPerson extends BaseModel {
  static override tableName = 'registry_persons';
  id!: string;
  nin!: string | null;
  bvn!: string | null;
  firstName!: string;
  lastName!: string;
  middleName!: string | null;
  dateOfBirth!: string;
  gender!: string;
  phone!: string | null;
  photo!: Buffer;
  photoMime!: string;
  createdAt!: Date;
}
export * from './webhooks.js';
