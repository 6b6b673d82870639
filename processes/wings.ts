/**
 * The wings of this deployment, composed once: every process (and every script or test that reads the
 * configuration) goes through here, so each wing's manifest (features/<wing>/manifest.ts) is known to
 * the floor before anything reads a setting. Order: the sections of docs/configuration.md after the
 * floor's own.
 */
import { composeWings } from '../platform/wing.js';
import { accountsWing } from '../features/accounts/manifest.js';
import { auditWing } from '../features/audit/manifest.js';
import { dedupeWing } from '../features/dedupe/manifest.js';
import { disputesWing } from '../features/disputes/manifest.js';
import { faceWing } from '../features/face/manifest.js';
import { identityWing } from '../features/identity/manifest.js';
import { livenessWing } from '../features/liveness/manifest.js';
import { registrySimulatorWing } from '../features/registry-simulator/manifest.js';
import { reportsWing } from '../features/reports/manifest.js';
import { searchWing } from '../features/search/manifest.js';
import { signInWing } from '../features/sign-in/manifest.js';
import { staffWing } from '../features/staff/manifest.js';
import { systemWing } from '../features/system/manifest.js';
import { usersWing } from '../features/users/manifest.js';
import { verificationWing } from '../features/verification/manifest.js';
import { webhooksWing } from '../features/webhooks/manifest.js';

export const WINGS = composeWings([
  identityWing,
  signInWing,
  faceWing,
  livenessWing,
  searchWing,
  reportsWing,
  webhooksWing,
  dedupeWing,
  accountsWing,
  auditWing,
  // Before verification: the retention sweep purges closed disputes before the search logs they hold.
  disputesWing,
  registrySimulatorWing,
  staffWing,
  systemWing,
  usersWing,
  verificationWing,
]);
