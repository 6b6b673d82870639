/**
 * The retention registry of this deployment: every wing's data families, composed once here
 * (platform/retention/README.md). The web process uses it for the DELETE of an account (its erasers),
 * the upstream worker for the retention sweep (its age rules and the erasers it retries). Order
 * matters for the sweep: disputes before the search logs they hold (processes/wings.ts lists the
 * disputes wing before the verification wing). A wing whose families need only
 * the database and the configuration declares them in its manifest (`dataFamilies`), added here from
 * processes/wings.ts; the others are named below with the stores they need.
 */
import type { Knex } from 'knex';
import type { Config } from '../platform/config.js';
import { auditEventsFamily } from '../platform/retention/audit-events-family.js';
import { RetentionRegistry } from '../platform/retention/registry.js';
import { faceDataFamilies } from '../features/face/data-families.js';
import { identityDataFamilies } from '../features/identity/data-families.js';
import { livenessDataFamilies } from '../features/liveness/data-families.js';
import { signInDataFamilies } from '../features/sign-in/data-families.js';
import type { BiometricAttemptsStore } from '../features/face/biometric-attempts-store.js';
import type { IdentityTokenStore } from '../features/identity/identity-tokens.js';
import type { LivenessSessionStore } from '../features/liveness/session-store.js';
import type { OtpService } from '../features/sign-in/otp-service.js';
import { WINGS } from './wings.js';

export interface DataFamilyDeps {
  db: Knex;
  config: Config;
  identityTokens: Pick<IdentityTokenStore, 'purgeUser'>;
  biometricAttempts: Pick<BiometricAttemptsStore, 'purgeUser'>;
  livenessSessions: Pick<LivenessSessionStore, 'purgeUser'>;
  /** The web process's; the sweep has none (it retries erasures without the phone, which is erased). */
  otp?: Pick<OtpService, 'forgetPhone'>;
}

export function dataFamilies(deps: DataFamilyDeps): RetentionRegistry {
  const { db, config } = deps;
  return new RetentionRegistry().register(
    auditEventsFamily(db, config.protection.retentionDaysAuditEvents),
    ...WINGS.flatMap((wing) => wing.dataFamilies?.({ db, config }) ?? []),
    ...identityDataFamilies(deps.identityTokens),
    ...faceDataFamilies(deps.biometricAttempts),
    ...livenessDataFamilies(deps.livenessSessions),
    ...signInDataFamilies(db, deps.otp ?? { forgetPhone: async () => {} }),
  );
}
