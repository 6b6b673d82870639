/**
 * The event map: every fact the service records, under ONE name, with the type of what it carries.
 *
 * Recording an event (AuditEventsRepository.record, platform/events/audit.ts) writes its AuditEvent row
 * and, when the event is public, its webhook outbox row, in one transaction. An event is public when it
 * has an entry in `PublicEventPayloads`: that entry is the thin body webhook receivers get (ids,
 * outcomes, statuses: never a face, a template, a NIN/BVN, a name or a phone), while `EventPayloads` is
 * the audit row's `data` (masked values and identifiers only, never a token, code or full number).
 *
 * Names that SPEC fixes stay as it says: the webhook types of SPEC 12.6 and the audit types it names
 * (`biometric.locked`, `operator.locked`, `user.erased`, `auth.signed_in`, `auth.sign_in_failed`,
 * `user.exported`). A fact that is both audited and public carries its webhook name in the audit log too.
 * How to add an event: platform/events/README.md.
 */

/** A value masked by `maskTail` (country code and the last digits), or null when there was none. */
type Masked = string | null;
type NoData = Record<string, never>;

/** The audit row's `data` of every event. */
export interface EventPayloads {
  // ---- sign-in and sessions (SPEC 13.3 security events) ----
  /** A consumer (one-time code) or a member of staff (password, and the second factor when enabled) signed in. */
  'auth.signed_in': { method: 'otp' | 'password'; sessionId: string };
  /**
   * A sign-in was refused. `reason` is the error code answered (`otp_invalid`, `otp_too_many_attempts`,
   * `invalid_credentials`, `mfa_required` with a wrong code, `account_locked`, ...). The subject is the
   * account when one is known, else none (an unknown staff identifier) or `phone_key` (a keyed hash of a
   * consumer's number, never the number).
   */
  'auth.sign_in_failed': { method: 'otp' | 'password'; reason: string; secondFactor?: boolean };
  'session.refresh_token_reused': NoData;

  // ---- staff accounts ----
  'operator.created': { identifier: string; role: string; orgId: string; via?: string };
  'operator.role_changed': { from: string; to: string };
  'operator.deactivated': { from: string; to: 'deactivated'; sessionsRevoked: number };
  'operator.reactivated': { from: string; to: string; sessionsRevoked: number };
  'operator.display_name_changed': NoData;
  'operator.password_reset': { wasLocked: boolean; sessionsRevoked: number };
  'operator.password_set': { wasFlagged: boolean; otherSessionsRevoked: number };
  'operator.locked': { failedAttempts: number; via: string; [detail: string]: unknown };
  /** A staff device's own failures locked it (the account is not locked by them). */
  'operator.device_locked': { failedAttempts: number; deviceId: string };
  'operator.unlocked': { via: string; lockSeconds?: number; wasLocked?: boolean; [detail: string]: unknown };
  'operator.mfa_enabled': NoData;
  'operator.mfa_reset': { wasEnabled: boolean; wasLocked?: boolean; sessionsRevoked: number };
  'operator.recovery_code_used': { recoveryCodesLeft: number };

  // ---- consumers' accounts ----
  /** PATCH /users/{id}: a phone change (`fields` holds `phone`, masked from/to) and a requested bankAccount change. */
  'profile.changed': {
    fields: string[];
    phone?: { from: Masked; to: Masked; applied: true };
    otherSessionsRevoked?: number;
    bankAccount?: { from: Masked; to: Masked; status: 'pending_upstream'; requestedAt: string };
  };
  'preferences.changed': Record<string, { from: unknown; to: unknown }>;
  /** The pending bankAccount change was confirmed upstream and is now the account's. */
  'user.bank_account.updated': { requestedAt: string };
  /** DELETE /users/{id}: the account is soft-deleted and its embedding left the index (the erasure follows). */
  'user.deleted': { embeddingRemoved: true; refreshTokensRevoked: number };
  /** Every copy of the deleted user's data is gone (PostgreSQL, Redis, the search snapshots). */
  'user.erased': { requestedAt: string; steps: string[]; redisPurgedAt: string; completedAt: string; embeddingRemovalSeq: string };
  /** The consumer took the export of everything held about them (GET /users/{id}/export). */
  'user.exported': { sections: string[] };

  // ---- identity links and the face ----
  'identity.linked': {
    registry: string;
    number: Masked;
    deviceHint: string | null;
    score: number;
    captureReused: boolean;
    crossRegistryFlagged: boolean;
    crossRegistryScore?: number;
    profileFilled: boolean;
  };
  'identity.link_refused': { registry: string; number: Masked; reason: 'duplicate_identity'; caseIds: string[] };
  'identity.link_released': { registry: string; number: Masked; linkedAt: string; reason: string };
  'identity.cross_registry_mismatch': {
    registry: string;
    otherRegistry: string;
    number: Masked;
    policy: string;
    action: 'blocked' | 'flagged';
    score: number;
    threshold: number;
    captureReused: boolean;
  };
  'biometric.locked': { route: string; outcome: string; consecutiveFailures: number; lockSeconds: number };
  'biometric.key_rotated': { activeKeyId: string; [detail: string]: unknown };
  'canonical_embedding.refreshed': CanonicalRefresh;
  'canonical_embedding.refresh_declined': CanonicalRefresh;

  // ---- search, disputes, dedupe ----
  /** An operator escalated one of their /identify results for review. */
  'identify.escalated': { escalatedAt: string };
  'dispute.created': { referenceId: string; status: 'open' };
  /** An operator changed a dispute's status (the note stays in the audit row, out of the webhook). */
  'dispute.updated': { from: string; to: string; note?: string };
  'dedupe.case.opened': {
    kind: string;
    userId: string;
    matchedUserId?: string;
    watchlistEntryId?: string;
    score: number;
    registry: string;
    blocked: boolean;
  };
  /** An administrator decided a case (the note stays in the audit row, out of the webhook). */
  'dedupe.case.decided': { kind: string; from: 'open'; to: string; userId: string; note?: string };
  'dedupe.capture_viewed': { kind: string };
  'watchlist.entry_added': { reason: string; caseId?: string };
  'watchlist.entry_removed': NoData;

  // ---- webhooks ----
  /** `host`: the endpoint's host name only (null when the URL does not parse), never its path or query. */
  'webhook.endpoint_created': { host: string | null; events: string[] };
  'webhook.endpoint_updated': { changed: string[]; host?: string | null; from?: string; to?: string };
  'webhook.endpoint_deleted': { host: string | null };
  'webhook.secret_rotated': { previousSecretExpiresAt: string };
  'webhook.event_replayed': { deliveries: number };

  // ---- housekeeping ----
  'retention.purged': { counts: Record<string, number>; cutoffs: Record<string, string> };
}

interface CanonicalRefresh {
  referenceId: string;
  reason: string;
  score: number;
  qualityScore: number | null;
  qualityIssues: string[] | null;
  storedQualityScore: number | null;
  floor: number;
}

/**
 * The public events (SPEC 12.6) and the body `data` each one's webhook carries. Receivers subscribe to
 * these names; the body never carries a face, a template, a NIN/BVN, a name, a phone or an account number.
 */
export interface PublicEventPayloads {
  /** A pending bankAccount change was confirmed upstream and is now the account's (the number is not sent). */
  'user.bank_account.updated': { userId: string; status: 'applied' };
  'user.deleted': { userId: string };
  'dispute.created': { disputeId: string; referenceId: string; userId: string; status: 'open' };
  'dispute.updated': { disputeId: string; referenceId: string; userId: string; previousStatus: string; status: string };
  'identify.escalated': { referenceId: string; operatorId: string; escalatedAt: string };
  'operator.deactivated': { operatorId: string };
  'dedupe.case.opened': { caseId: string; kind: string; userId: string; status: 'open' };
  'dedupe.case.decided': { caseId: string; kind: string; userId: string; status: string };
}

export type EventName = keyof EventPayloads;
export type PublicEventName = keyof PublicEventPayloads & EventName;

// Every public event is an event (a webhook type missing from EventPayloads fails here).
type Assert<T extends true> = T;
export type _PublicEventsAreEvents = Assert<keyof PublicEventPayloads extends EventName ? true : false>;

/** What the map says of each event at run time: whether it is public, and its default severity. */
export interface EventInfo<Public extends boolean> {
  public: Public;
  severity: 'info' | 'high';
}

/**
 * Every event by name. The type makes the list complete (a name of EventPayloads missing here fails
 * tsc) and its `public` flag true exactly for the names of PublicEventPayloads.
 */
export const EVENTS: { readonly [K in EventName]: EventInfo<K extends PublicEventName ? true : false> } = {
  'auth.signed_in': { public: false, severity: 'info' },
  'auth.sign_in_failed': { public: false, severity: 'info' },
  'session.refresh_token_reused': { public: false, severity: 'high' },
  'operator.created': { public: false, severity: 'info' },
  'operator.role_changed': { public: false, severity: 'info' },
  'operator.deactivated': { public: true, severity: 'high' },
  'operator.reactivated': { public: false, severity: 'info' },
  'operator.display_name_changed': { public: false, severity: 'info' },
  'operator.password_reset': { public: false, severity: 'info' },
  'operator.password_set': { public: false, severity: 'info' },
  'operator.locked': { public: false, severity: 'high' },
  'operator.device_locked': { public: false, severity: 'high' },
  'operator.unlocked': { public: false, severity: 'info' },
  'operator.mfa_enabled': { public: false, severity: 'info' },
  'operator.mfa_reset': { public: false, severity: 'high' },
  'operator.recovery_code_used': { public: false, severity: 'high' },
  'profile.changed': { public: false, severity: 'info' },
  'preferences.changed': { public: false, severity: 'info' },
  'user.bank_account.updated': { public: true, severity: 'info' },
  'user.deleted': { public: true, severity: 'info' },
  'user.erased': { public: false, severity: 'info' },
  'user.exported': { public: false, severity: 'info' },
  'identity.linked': { public: false, severity: 'info' },
  'identity.link_refused': { public: false, severity: 'high' },
  'identity.link_released': { public: false, severity: 'info' },
  'identity.cross_registry_mismatch': { public: false, severity: 'high' },
  'biometric.locked': { public: false, severity: 'high' },
  'biometric.key_rotated': { public: false, severity: 'info' },
  'canonical_embedding.refreshed': { public: false, severity: 'info' },
  'canonical_embedding.refresh_declined': { public: false, severity: 'info' },
  'identify.escalated': { public: true, severity: 'info' },
  'dispute.created': { public: true, severity: 'info' },
  'dispute.updated': { public: true, severity: 'info' },
  'dedupe.case.opened': { public: true, severity: 'high' },
  'dedupe.case.decided': { public: true, severity: 'info' },
  'dedupe.capture_viewed': { public: false, severity: 'info' },
  'watchlist.entry_added': { public: false, severity: 'high' },
  'watchlist.entry_removed': { public: false, severity: 'high' },
  'webhook.endpoint_created': { public: false, severity: 'high' },
  'webhook.endpoint_updated': { public: false, severity: 'info' },
  'webhook.endpoint_deleted': { public: false, severity: 'info' },
  'webhook.secret_rotated': { public: false, severity: 'high' },
  'webhook.event_replayed': { public: false, severity: 'info' },
  'retention.purged': { public: false, severity: 'info' },
};

export const EVENT_NAMES = Object.keys(EVENTS) as EventName[];

export function isEventName(name: string): name is EventName {
  return Object.prototype.hasOwnProperty.call(EVENTS, name);
}

/** The webhook event types, in the map's order: what an endpoint may subscribe to. */
export const PUBLIC_EVENT_TYPES = EVENT_NAMES.filter((n): n is PublicEventName => EVENTS[n].public);

/**
 * Names older versions wrote for facts that now have one name. Stored rows were renamed by the
 * migration 20261127200000_event_names (which keeps its own copy: migrations import no application
 * code); this table documents it. `operator.status_changed` became `operator.deactivated` or
 * `operator.reactivated` by the row's `data.to`.
 */
export const FORMER_EVENT_NAMES: Readonly<Record<string, EventName>> = {
  search_escalated: 'identify.escalated',
  'dedupe.case_opened': 'dedupe.case.opened',
  'dedupe.case_decided': 'dedupe.case.decided',
  'dispute.status_changed': 'dispute.updated',
  'profile.deleted': 'user.deleted',
  'profile.bank_account_confirmed': 'user.bank_account.updated',
};
