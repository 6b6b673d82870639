/**
 * The identity wing's settings, composed into the configuration by its manifest: the registry it
 * asks (`config.registry`, with the simulator's two switches, which stand in for that registry in
 * development) and the linking workflow (`config.identity`).
 */
import { s, type Parsed, type WingSettingGroup } from '../../platform/config.js';

export const REGISTRY_SETTINGS = {
  url: s({
    env: 'REGISTRY_URL',
    kind: 'url',
    default: (c: Parsed) => `http://127.0.0.1:${c.http?.port}/api`,
    doc: "Identity registry base URL (default: this server's own simulator).",
  }),
  timeoutMs: s({
    env: 'REGISTRY_TIMEOUT_MS',
    kind: 'int',
    default: 5000,
    min: 50,
    doc: 'Timeout of one registry call; beyond it validate answers 502 `registry_unavailable`.',
  }),
  maxBodyBytes: s({
    env: 'REGISTRY_MAX_BODY_BYTES',
    kind: 'int',
    default: 16 * 1024 * 1024,
    min: 1024,
    doc: 'Largest registry answer read (a record with its base64 photo); a larger one is 502 `registry_unavailable`. Redirects from the registry are never followed.',
  }),
  simulator: s({
    env: 'REGISTRY_SIMULATOR',
    kind: 'bool',
    default: (c: Parsed) => c.runtime?.nodeEnv !== 'production',
    doc: 'Mount the registry simulator under `/api` (a development stand-in for the national registry: anyone may enrol a person there). Refused in production.',
  }),
  simFault: s({
    env: 'REGISTRY_SIM_FAULT',
    kind: 'string',
    default: 'none',
    enum: ['none', 'timeout', 'error'] as const,
    doc: 'Fault injection of the registry simulator (tests can also send `X-Registry-Fault`).',
  }),
} as const;

export const IDENTITY_SETTINGS = {
  validationTokenTtlSeconds: s({
    env: 'VALIDATION_TOKEN_TTL_SECONDS',
    kind: 'int',
    default: 900,
    min: 10,
    doc: 'validationToken lifetime (the registry photo is cached as long).',
  }),
  validationsPerUserPerHour: s({
    env: 'VALIDATIONS_PER_USER_PER_HOUR',
    kind: 'int',
    default: 10,
    min: 1,
    doc: 'NIN/BVN validations one consumer may start per hour (429 `rate_limited`); bounds how many verify-face attempts re-validating can buy, and number enumeration.',
  }),
  exportsPerDay: s({
    env: 'EXPORTS_PER_DAY',
    kind: 'int',
    default: 3,
    min: 1,
    doc: "Data exports (`GET /users/{id}/export`) one consumer may take per day (a fixed 24-hour window from the first; beyond it 429 `rate_limited`). Each export sends an SMS notice to the account's phone.",
  }),
  verifyFaceMaxAttempts: s({
    env: 'VERIFY_FACE_MAX_ATTEMPTS',
    kind: 'int',
    default: 5,
    min: 1,
    doc: 'verify-face attempts per validationToken (then 429 `rate_limited`).',
  }),
  captureReuseSeconds: s({
    env: 'CAPTURE_REUSE_SECONDS',
    kind: 'int',
    default: 600,
    min: 0,
    doc: 'How long a passing NIN capture can be reused for BVN (`reuseCapture=true`).',
  }),
  linkTokenTtlSeconds: s({ env: 'LINK_TOKEN_TTL_SECONDS', kind: 'int', default: 300, min: 5, doc: 'linkToken lifetime.' }),
  proofTokenTtlSeconds: s({ env: 'PROOF_TOKEN_TTL_SECONDS', kind: 'int', default: 120, min: 5, doc: 'proofToken lifetime.' }),
  crossRegistryMismatchPolicy: s({
    env: 'CROSS_REGISTRY_MISMATCH_POLICY',
    kind: 'string',
    default: 'hard-block',
    enum: ['hard-block', 'flag-and-continue'] as const,
    doc: "What verify-face does when the face does not match the account's other registry.",
  }),
  bankAccountConfirmDelayMs: s({
    env: 'BANK_ACCOUNT_CONFIRM_DELAY_MS',
    kind: 'int',
    default: 30_000,
    min: 0,
    doc: 'Delay of the simulated upstream confirmation of a bankAccount change.',
  }),
} as const;

declare module '../../platform/config.js' {
  interface WingSettings {
    registry: typeof REGISTRY_SETTINGS;
    identity: typeof IDENTITY_SETTINGS;
  }
}

export const identitySettingGroups: Record<string, WingSettingGroup> = {
  registry: {
    title: 'Identity registry',
    settings: REGISTRY_SETTINGS,
    check({ isProduction, registry }, problems, env) {
      if (!isProduction) return;
      if (registry.simFault !== 'none') problems.push('REGISTRY_SIM_FAULT is a test setting and is refused in production');
      if (registry.simulator) problems.push('REGISTRY_SIMULATOR=true is refused in production: the simulator lets anyone enrol an identity');
      if (!env.REGISTRY_URL) problems.push('REGISTRY_URL must name the real identity registry in production (the default is the simulator)');
      if (env.REGISTRY_URL && !String(registry.url).startsWith('https:'))
        problems.push('REGISTRY_URL must be https: in production (NIN/BVN numbers and registry photos travel in it)');
    },
  },
  identity: { title: 'Identity linking and account changes', settings: IDENTITY_SETTINGS },
};
