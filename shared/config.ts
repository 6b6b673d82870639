/**
 * The one typed, validated configuration of every process (web, face, search, scripts).
 * Each setting is declared once below: its environment variable, type, default and meaning.
 * `docs/configuration.md` is generated from the same table (scripts/gen-config-doc.ts).
 */
import { CALIBRATED_THRESHOLDS } from './thresholds.js';
import { BiometricKeyRing, KeyRingError } from './crypto/key-ring.js';

/** Settings parsed so far, as seen by a default that depends on them. */
type Parsed = Record<string, unknown>;
type Kind = 'string' | 'int' | 'number' | 'bool' | 'url';

interface SettingSpec<K extends Kind, E extends readonly string[] | undefined = undefined> {
  env: string;
  kind: K;
  /** Default for local use; a function receives the settings parsed so far (declaration order). */
  default?: unknown;
  enum?: E;
  min?: number;
  max?: number;
  doc: string;
  /** Never printed (config dumps and docs show `<secret>`). */
  secret?: boolean;
}

function s<K extends Kind, const E extends readonly string[] | undefined = undefined>(
  spec: SettingSpec<K, E>,
): SettingSpec<K, E> {
  return spec;
}

export const SETTINGS = {
  nodeEnv: s({ env: 'NODE_ENV', kind: 'string', default: 'development', enum: ['development', 'test', 'production'] as const, doc: 'Runtime mode. `production` refuses development secrets and the SMS outbox.' }),
  port: s({ env: 'PORT', kind: 'int', default: 3000, min: 0, max: 65535, doc: 'HTTP port of the web process (API and registry simulator).' }),
  host: s({ env: 'HOST', kind: 'string', default: '127.0.0.1', doc: 'Interface the web process listens on.' }),
  faceEnginePort: s({ env: 'FACE_ENGINE_PORT', kind: 'int', default: 3100, min: 0, max: 65535, doc: 'Port of the face worker\'s own `/version` and `/health`.' }),
  faceEngineUrl: s({ env: 'FACE_ENGINE_URL', kind: 'url', default: (c: Parsed) => `http://127.0.0.1:${c.faceEnginePort}`, doc: 'Where the API reaches the face worker\'s `/version` and `/health`.' }),
  searchHealthPort: s({ env: 'SEARCH_HEALTH_PORT', kind: 'int', default: 3101, min: 0, max: 65535, doc: 'Port of the search worker\'s `/health` (index size and applied change sequence).' }),
  searchHealthUrl: s({ env: 'SEARCH_HEALTH_URL', kind: 'url', default: (c: Parsed) => `http://127.0.0.1:${c.searchHealthPort}`, doc: 'Where the API reaches a search worker\'s `/health`.' }),
  databaseUrl: s({ env: 'DATABASE_URL', kind: 'url', default: 'postgres://postgres@127.0.0.1:5432/faceid', doc: 'PostgreSQL, the source of truth.' }),
  databasePoolMax: s({ env: 'DATABASE_POOL_MAX', kind: 'int', default: 10, min: 1, max: 200, doc: 'Connections per process.' }),
  redisUrl: s({ env: 'REDIS_URL', kind: 'url', default: 'redis://127.0.0.1:6379', doc: 'Redis: queues, one-time codes, single-use tokens, rate limits.' }),
  redisPrefix: s({ env: 'REDIS_PREFIX', kind: 'string', default: 'faceid', doc: 'Prefix of every Redis key and BullMQ queue of this deployment (tests use their own).' }),
  registryUrl: s({ env: 'REGISTRY_URL', kind: 'url', default: (c: Parsed) => `http://127.0.0.1:${c.port}/api`, doc: 'Identity registry base URL (default: this server\'s own simulator).' }),
  registryTimeoutMs: s({ env: 'REGISTRY_TIMEOUT_MS', kind: 'int', default: 5000, min: 50, doc: 'Timeout of one registry call; beyond it validate answers 502 `registry_unavailable`.' }),
  registrySimulator: s({ env: 'REGISTRY_SIMULATOR', kind: 'bool', default: (c: Parsed) => c.nodeEnv !== 'production', doc: 'Mount the registry simulator under `/api` (a development stand-in for the national registry: anyone may enrol a person there). Refused in production.' }),
  registrySimFault: s({ env: 'REGISTRY_SIM_FAULT', kind: 'string', default: 'none', enum: ['none', 'timeout', 'error'] as const, doc: 'Fault injection of the registry simulator (tests can also send `X-Registry-Fault`).' }),
  logLevel: s({ env: 'LOG_LEVEL', kind: 'string', default: 'info', enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, doc: 'pino log level.' }),
  trustProxy: s({ env: 'TRUST_PROXY', kind: 'bool', default: false, doc: 'Take the client IP from `X-Forwarded-For` (only behind a trusted proxy).' }),
  maxUploadBytes: s({ env: 'MAX_UPLOAD_BYTES', kind: 'int', default: 8 * 1024 * 1024, min: 1024, doc: 'Largest accepted upload; beyond it 413 `payload_too_large`.' }),
  maxImagePixels: s({ env: 'MAX_IMAGE_PIXELS', kind: 'int', default: 40_000_000, min: 10_000, doc: 'Largest decoded image (pixels); beyond it 400 `invalid_image`.' }),

  jwtPrivateKey: s({ env: 'JWT_PRIVATE_KEY', kind: 'string', default: '', secret: true, doc: 'PKCS#8 PEM EdDSA (Ed25519) key signing access tokens. Empty: a development key is generated in `var/dev-jwt-key.pem` (refused in production).' }),
  biometricKeys: s({ env: 'BIOMETRIC_KEYS', kind: 'string', default: '', secret: true, doc: 'Key ring sealing face templates and stored captures at rest (AES-256-GCM): `kid:base64(32 bytes),kid2:...`. Empty: a fixed development key (refused in production). Rotation: docs/data-protection.md.' }),
  biometricActiveKeyId: s({ env: 'BIOMETRIC_ACTIVE_KEY_ID', kind: 'string', default: '', doc: 'The key of BIOMETRIC_KEYS that seals new data (default: the last one listed); the others only decrypt.' }),
  linkNumberHashKey: s({ env: 'LINK_NUMBER_HASH_KEY', kind: 'string', default: '', secret: true, doc: 'Key (base64, 32 bytes) of the keyed hash (HMAC-SHA256) that link rows keep of a NIN/BVN: an erased account keeps only this hash, so the number is still recognised. Never rotated (a new key forgets every erased number). Empty: a fixed development key (refused in production).' }),
  erasureMaxSeconds: s({ env: 'ERASURE_MAX_SECONDS', kind: 'int', default: 300, min: 1, doc: 'Longest time a deleted user\'s template may stay in a search snapshot on disk: each search worker rewrites its snapshot (and removes the older ones) within this after a deletion.' }),
  retentionDaysSearchLogs: s({ env: 'RETENTION_DAYS_SEARCH_LOGS', kind: 'int', default: 400, min: 1, doc: 'Days a SearchLog row is kept (billing is monthly and disputes refer to calls: 13 months covers a year of invoices and their disputes). Purged by the retention job.' }),
  retentionDaysDisputes: s({ env: 'RETENTION_DAYS_DISPUTES', kind: 'int', default: 2190, min: 1, doc: 'Days a resolved or rejected dispute is kept after its last change (6 years: the limitation period for a contract claim). Open disputes are never purged.' }),
  retentionDaysAuditEvents: s({ env: 'RETENTION_DAYS_AUDIT_EVENTS', kind: 'int', default: 2190, min: 1, doc: 'Days an AuditEvent is kept (6 years: accountability for processing, NDPA 2023 s.39, and the limitation period).' }),
  retentionSweepIntervalSeconds: s({ env: 'RETENTION_SWEEP_INTERVAL_SECONDS', kind: 'int', default: 3600, min: 1, doc: 'How often the retention job (a BullMQ repeatable job on the upstream worker) purges records past their RETENTION_DAYS_*.' }),
  jwtIssuer: s({ env: 'JWT_ISSUER', kind: 'string', default: 'faceid', doc: 'Issuer claim of access tokens.' }),
  accessTokenTtlSeconds: s({ env: 'ACCESS_TOKEN_TTL_SECONDS', kind: 'int', default: 900, min: 30, doc: 'Access token lifetime.' }),
  refreshTokenTtlSeconds: s({ env: 'REFRESH_TOKEN_TTL_SECONDS', kind: 'int', default: 30 * 24 * 3600, min: 60, doc: 'Refresh token lifetime (rotated on every refresh).' }),

  otpTtlSeconds: s({ env: 'OTP_TTL_SECONDS', kind: 'int', default: 300, min: 10, doc: 'One-time code lifetime.' }),
  otpCooldownSeconds: s({ env: 'OTP_COOLDOWN_SECONDS', kind: 'int', default: 60, min: 0, doc: 'Per-phone wait between code requests (429 `otp_cooldown`).' }),
  otpMaxAttempts: s({ env: 'OTP_MAX_ATTEMPTS', kind: 'int', default: 5, min: 1, doc: 'Wrong codes before the code dies (429 `otp_too_many_attempts`).' }),
  otpRequestsPerIpPerHour: s({ env: 'OTP_REQUESTS_PER_IP_PER_HOUR', kind: 'int', default: 20, min: 1, doc: 'Per-IP hourly cap on code requests (SMS pumping).' }),
  otpRequestsPerPhonePerDay: s({ env: 'OTP_REQUESTS_PER_PHONE_PER_DAY', kind: 'int', default: 10, min: 1, doc: 'Codes one phone number may be sent per 24 h (429 `rate_limited`): bounds guessing against one number to this × OTP_MAX_ATTEMPTS per day.' }),
  smsTransport: s({ env: 'SMS_TRANSPORT', kind: 'string', default: (c: Parsed) => (c.nodeEnv === 'production' ? 'webhook' : 'outbox'), enum: ['outbox', 'webhook'] as const, doc: '`outbox` appends codes to a file (development, tests); `webhook` POSTs them to the SMS gateway.' }),
  smsOutboxFile: s({ env: 'SMS_OUTBOX_FILE', kind: 'string', default: 'var/sms-outbox.jsonl', doc: 'Outbox file, one JSON line `{ to, code, sentAt }` per code.' }),
  smsWebhookUrl: s({ env: 'SMS_WEBHOOK_URL', kind: 'string', default: '', doc: 'SMS gateway endpoint for `SMS_TRANSPORT=webhook`.' }),
  smsWebhookToken: s({ env: 'SMS_WEBHOOK_TOKEN', kind: 'string', default: '', secret: true, doc: 'Bearer token sent to the SMS gateway (`Authorization: Bearer ...`), when it wants one.' }),
  smsWebhookTimeoutMs: s({ env: 'SMS_WEBHOOK_TIMEOUT_MS', kind: 'int', default: 5000, min: 100, doc: 'Timeout of one SMS gateway call; beyond it the code request answers 503 and can be retried at once.' }),

  validationTokenTtlSeconds: s({ env: 'VALIDATION_TOKEN_TTL_SECONDS', kind: 'int', default: 900, min: 10, doc: 'validationToken lifetime (the registry photo is cached as long).' }),
  validationsPerUserPerHour: s({ env: 'VALIDATIONS_PER_USER_PER_HOUR', kind: 'int', default: 10, min: 1, doc: 'NIN/BVN validations one consumer may start per hour (429 `rate_limited`); bounds how many verify-face attempts re-validating can buy, and number enumeration.' }),
  verifyFaceMaxAttempts: s({ env: 'VERIFY_FACE_MAX_ATTEMPTS', kind: 'int', default: 5, min: 1, doc: 'verify-face attempts per validationToken (then 429 `rate_limited`).' }),
  captureReuseSeconds: s({ env: 'CAPTURE_REUSE_SECONDS', kind: 'int', default: 600, min: 0, doc: 'How long a passing NIN capture can be reused for BVN (`reuseCapture=true`).' }),
  linkTokenTtlSeconds: s({ env: 'LINK_TOKEN_TTL_SECONDS', kind: 'int', default: 300, min: 5, doc: 'linkToken lifetime.' }),
  proofTokenTtlSeconds: s({ env: 'PROOF_TOKEN_TTL_SECONDS', kind: 'int', default: 120, min: 5, doc: 'proofToken lifetime.' }),
  crossRegistryMismatchPolicy: s({ env: 'CROSS_REGISTRY_MISMATCH_POLICY', kind: 'string', default: 'hard-block', enum: ['hard-block', 'flag-and-continue'] as const, doc: 'What verify-face does when the face does not match the account\'s other registry.' }),
  bankAccountConfirmDelayMs: s({ env: 'BANK_ACCOUNT_CONFIRM_DELAY_MS', kind: 'int', default: 30_000, min: 0, doc: 'Delay of the simulated upstream confirmation of a bankAccount change.' }),
  upstreamWorkerInWeb: s({ env: 'UPSTREAM_WORKER_IN_WEB', kind: 'bool', default: true, doc: 'Run the `upstream` queue\'s worker (delayed bankAccount confirmations) inside the web process; `false` when `processes/upstream.ts` (`npm run start:upstream`) runs it instead.' }),

  operatorMaxFailedLogins: s({ env: 'OPERATOR_MAX_FAILED_LOGINS', kind: 'int', default: 5, min: 1, doc: 'Failed logins in a row before an operator is locked.' }),
  operatorLoginsPerIpPerHour: s({ env: 'OPERATOR_LOGINS_PER_IP_PER_HOUR', kind: 'int', default: 30, min: 1, doc: 'Operator sign-in attempts per client address AND identifier per hour (429 `rate_limited`), checked before any password hashing: guessing one account from an office\'s address does not block the other operators behind it.' }),
  operatorLoginFailuresPerIpPerHour: s({ env: 'OPERATOR_LOGIN_FAILURES_PER_IP_PER_HOUR', kind: 'int', default: 100, min: 1, doc: 'Failed operator sign-ins per client address per hour, whatever the identifier (password spraying), beyond which that address gets 429 `rate_limited`; successes never count.' }),
  adminLockSeconds: s({ env: 'ADMIN_LOCK_SECONDS', kind: 'int', default: 900, min: 0, doc: 'An administrator locked by failed sign-ins is unlocked after this long (0: only a reset or `npm run unlock-operator` unlocks), so nobody can lock the organisation out of its last administrator; operators stay locked until an administrator resets them.' }),
  adminIdentifier: s({ env: 'ADMIN_IDENTIFIER', kind: 'string', default: '', doc: 'First administrator, created at start-up when no administrator exists.' }),
  adminPassword: s({ env: 'ADMIN_PASSWORD', kind: 'string', default: '', secret: true, doc: 'Password of that first administrator.' }),

  matchThreshold: s({ env: 'MATCH_THRESHOLD', kind: 'number', default: CALIBRATED_THRESHOLDS.match, min: -1, max: 1, doc: 'Cosine at or above which two faces match (calibrated: docs/face-engine.md).' }),
  highConfidenceThreshold: s({ env: 'HIGH_CONFIDENCE_THRESHOLD', kind: 'number', default: CALIBRATED_THRESHOLDS.highConfidence, min: -1, max: 1, doc: '/verify/self score at or above which the canonical embedding is refreshed.' }),
  livenessThreshold: s({ env: 'LIVENESS_THRESHOLD', kind: 'number', default: CALIBRATED_THRESHOLDS.liveness, min: 0, max: 1, doc: 'Live probability below which a capture fails liveness.' }),
  identifyMatchThreshold: s({ env: 'IDENTIFY_MATCH_THRESHOLD', kind: 'number', default: (c: Parsed) => c.matchThreshold, min: -1, max: 1, doc: 'Cosine at or above which /identify returns a candidate (1:N). Default: MATCH_THRESHOLD. A 1:N search compares the probe with everyone enrolled, so its false-positive rate grows with the gallery (FPIR ≈ 1 − (1 − FMR)^N): set it from your own data (docs/face-engine.md, "The 1:N threshold").' }),
  canonicalRefreshMinQuality: s({ env: 'CANONICAL_REFRESH_MIN_QUALITY', kind: 'int', default: 50, min: 0, max: 100, doc: 'Capture quality score (0..100) at or above which a high-confidence /verify/self always refreshes the canonical embedding; below it, only when not worse than the stored capture\'s (docs/face-engine.md, "Capture quality").' }),
  identifyMaxCandidates: s({ env: 'IDENTIFY_MAX_CANDIDATES', kind: 'int', default: 5, min: 1, max: 100, doc: 'Most candidates /identify returns.' }),
  faceJobTimeoutMs: s({ env: 'FACE_JOB_TIMEOUT_MS', kind: 'int', default: 10_000, min: 100, doc: 'How long the API awaits a face or search job before 503 `face_engine_unavailable`.' }),
  failFast: s({ env: 'FAIL_FAST', kind: 'bool', default: true, doc: 'Refuse face work at once (503 with Retry-After, nothing enqueued) when no worker is on its queue, Redis is unreachable or FACE_QUEUE_MAX_WAITING jobs wait; false: enqueue and wait up to FACE_JOB_TIMEOUT_MS (the test harness uses false so that the timeout and withdrawal path stays exercised).' }),
  faceQueueMaxWaiting: s({ env: 'FACE_QUEUE_MAX_WAITING', kind: 'int', default: 50, min: 1, doc: 'Jobs waiting on one face/search queue beyond which face routes answer 503 `face_engine_unavailable` with Retry-After at once (a bound on waiting work).' }),
  failFastSampleMs: s({ env: 'FAIL_FAST_SAMPLE_MS', kind: 'int', default: 500, min: 0, doc: 'How long a healthy sample of the queues (workers alive, jobs waiting) is reused by the fail-fast check; an unhealthy one is never reused.' }),
  failFastRetryAfterSeconds: s({ env: 'FAIL_FAST_RETRY_AFTER_SECONDS', kind: 'int', default: 5, min: 1, doc: 'Retry-After of the fail-fast 503s (no worker, Redis unreachable, queue full).' }),
  supervisorStatusFile: s({ env: 'SUPERVISOR_STATUS_FILE', kind: 'string', default: '', doc: 'Set by `npm start` for its children: the supervisor\'s status file (restarts, crash loops), reported by GET /health as `processes`.' }),
  shutdownDrainMs: s({ env: 'SHUTDOWN_DRAIN_MS', kind: 'int', default: 15_000, min: 0, doc: 'On SIGTERM/SIGINT the web process stops accepting connections and waits up to this long for in-flight requests to be answered before it closes the rest (default: above FACE_JOB_TIMEOUT_MS, so an awaited face job can finish).' }),
  faceModelsDir: s({ env: 'FACE_MODELS_DIR', kind: 'string', default: 'var/models', doc: 'Directory of the four ONNX models (fetched by `npm run setup`).' }),
  faceIntraOpThreads: s({ env: 'FACE_INTRA_OP_THREADS', kind: 'int', default: 1, min: 1, max: 64, doc: 'onnxruntime intra-op threads per face worker process.' }),
  faceProcesses: s({ env: 'FACE_PROCESSES', kind: 'int', default: 2, min: 1, max: 64, doc: '`face` processes `npm start` runs (one per core: onnxruntime runs a model on the process\'s main thread, so a second process, not a second job slot, uses the second core; docs/performance.md). The first answers `/health` on FACE_ENGINE_PORT, the others on a free port each.' }),
  searchProcesses: s({ env: 'SEARCH_PROCESSES', kind: 'int', default: 2, min: 1, max: 16, doc: '`search` processes (replicas) `npm start` runs. With 2, the death of one is no outage: the other serves while the supervisor restarts it (docs/reliability.md); each holds its own copy of the index codes and ids (about 190 MiB at 1M, docs/vector-index.md). The first answers `/health` on SEARCH_HEALTH_PORT, the others on a free port each.' }),
  faceWorkerConcurrency: s({ env: 'FACE_WORKER_CONCURRENCY', kind: 'int', default: 1, min: 1, max: 64, doc: 'Jobs one face worker process runs at once.' }),
  vectorIndexFactory: s({ env: 'VECTOR_INDEX_FACTORY', kind: 'string', default: 'BinarySketch512', doc: 'Index type: `BinarySketch<bits>` (binary codes in memory, Hamming scan, exact re-rank; the default, docs/vector-index.md) or any FAISS factory string (inner product), e.g. `Flat`, `IVF1024,SQ8`.' }),
  vectorIndexNprobe: s({ env: 'VECTOR_INDEX_NPROBE', kind: 'int', default: 32, min: 1, max: 65536, doc: 'Inverted lists probed per query by IVF index types (speed/recall trade-off; see docs/vector-index.md).' }),
  searchSyncIntervalMs: s({ env: 'SEARCH_SYNC_INTERVAL_MS', kind: 'int', default: 1000, min: 0, doc: 'Period of a search worker\'s background catch-up from the change log (0: only when a search needs it).' }),
  searchWorkerConcurrency: s({ env: 'SEARCH_WORKER_CONCURRENCY', kind: 'int', default: 16, min: 1, max: 64, doc: 'Search jobs one search worker holds at once (searches that are waiting together go to the index in one call, up to SEARCH_MAX_BATCH).' }),
  searchSnapshotDir: s({ env: 'SEARCH_SNAPSHOT_DIR', kind: 'string', default: 'var/search-snapshots', doc: 'Where search replicas keep index snapshots (a replica starts from the newest valid one plus the changes after it; see docs/vector-index.md).' }),
  searchRerankCandidates: s({ env: 'SEARCH_RERANK_CANDIDATES', kind: 'int', default: 2000, min: 10, max: 100_000, doc: 'Candidates a `BinarySketch` index takes from its Hamming scan per query (recall/speed trade-off; docs/vector-index.md).' }),
  searchExactCandidates: s({ env: 'SEARCH_EXACT_CANDIDATES', kind: 'int', default: 200, min: 0, max: 100_000, doc: 'Of the Hamming candidates, how many a `BinarySketch` index re-ranks exactly (float32 reads) after ordering them by the asymmetric estimate; 0: all of them (docs/vector-index.md).' }),
  searchMaxBatch: s({ env: 'SEARCH_MAX_BATCH', kind: 'int', default: 32, min: 1, max: 1024, doc: 'Most `knn` searches a search worker sends to the index in one call (micro-batching).' }),
  searchRetrainGrowth: s({ env: 'SEARCH_RETRAIN_GROWTH', kind: 'number', default: 2, min: 1.1, max: 100, doc: 'An index type that needs training is retrained (in the background) once the population exceeds this factor times the rows it was trained on.' }),
  searchPruneIntervalMs: s({ env: 'SEARCH_PRUNE_INTERVAL_MS', kind: 'int', default: 60_000, min: 0, doc: 'Period at which a search worker prunes change-log rows every live replica (and snapshot) has applied (0: never).' }),
  searchReplicaStaleMs: s({ env: 'SEARCH_REPLICA_STALE_MS', kind: 'int', default: 600_000, min: 1000, doc: 'A replica whose position is older than this no longer holds back change-log pruning (it rebuilds if it comes back behind the pruned point).' }),
  dependencyPollIntervalMs: s({ env: 'DEPENDENCY_POLL_INTERVAL_MS', kind: 'int', default: 15_000, min: 100, doc: 'Refresh period of the `service_dependency_up` gauge.' }),
  webhookRetryScheduleSeconds: s({ env: 'WEBHOOK_RETRY_SCHEDULE_SECONDS', kind: 'string', default: '5,300,1800,7200,18000,36000,36000', doc: 'Waits (seconds, comma-separated) before each retry of a webhook delivery that did not get a 2xx; each wait gets ±10% jitter; after the last retry fails the delivery is `failed` (docs/webhooks.md).' }),
  webhookTimeoutMs: s({ env: 'WEBHOOK_TIMEOUT_MS', kind: 'int', default: 15_000, min: 100, doc: 'Timeout of one webhook delivery attempt (connect, send, answer); beyond it the attempt failed and is retried.' }),
  webhookSecretOverlapSeconds: s({ env: 'WEBHOOK_SECRET_OVERLAP_SECONDS', kind: 'int', default: 86_400, min: 0, doc: 'After a webhook secret rotation, how long deliveries are signed with the old secret as well as the new one.' }),
  webhookAllowPrivate: s({ env: 'WEBHOOK_ALLOW_PRIVATE', kind: 'bool', default: (c: Parsed) => c.nodeEnv !== 'production', doc: 'Allow webhook endpoints on http and on private, loopback or link-local addresses (default: outside production only). Off: only https to public addresses, checked against what the name resolves to when each attempt is sent, redirects not followed (docs/security.md).' }),
  webhookRetentionDays: s({ env: 'WEBHOOK_RETENTION_DAYS', kind: 'int', default: 30, min: 1, doc: 'Webhook events older than this, with no delivery still pending, are deleted with their deliveries and delivery log (hourly, by the webhook worker); a purged event can no longer be replayed.' }),
  webhookDispatchIntervalMs: s({ env: 'WEBHOOK_DISPATCH_INTERVAL_MS', kind: 'int', default: 1000, min: 50, doc: 'Period at which the webhook dispatcher scans the event outbox and the due deliveries (PostgreSQL) and queues their attempts; also how soon deliveries resume after a Redis outage.' }),
  billingTiersFile: s({ env: 'BILLING_TIERS_FILE', kind: 'string', default: 'config/billing-tiers.json', doc: 'Static contracted-tier file of the billing report.' }),
} as const;

type SpecOf<K extends keyof typeof SETTINGS> = (typeof SETTINGS)[K];
type ValueOf<S> = S extends { enum: readonly (infer V)[] }
  ? V
  : S extends { kind: 'int' | 'number' }
    ? number
    : S extends { kind: 'bool' }
      ? boolean
      : string;

export type Config = { readonly [K in keyof typeof SETTINGS]: ValueOf<SpecOf<K>> } & {
  readonly isProduction: boolean;
};

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

function parseValue(key: string, spec: SettingSpec<Kind, readonly string[] | undefined>, raw: string, problems: string[]): unknown {
  const where = `${spec.env}=${spec.secret ? '<secret>' : JSON.stringify(raw)}`;
  switch (spec.kind) {
    case 'int':
    case 'number': {
      const n = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(n) || (spec.kind === 'int' && !Number.isInteger(n))) {
        problems.push(`${where}: expected ${spec.kind === 'int' ? 'an integer' : 'a number'}`);
        return undefined;
      }
      if (spec.min !== undefined && n < spec.min) problems.push(`${where}: must be >= ${spec.min}`);
      if (spec.max !== undefined && n > spec.max) problems.push(`${where}: must be <= ${spec.max}`);
      return n;
    }
    case 'bool':
      if (/^(1|true|yes|on)$/i.test(raw)) return true;
      if (/^(0|false|no|off|)$/i.test(raw)) return false;
      problems.push(`${where}: expected true or false`);
      return undefined;
    case 'url':
      try {
        new URL(raw);
      } catch {
        problems.push(`${where}: expected a URL`);
      }
      return raw.replace(/\/+$/, '');
    default:
      if (spec.enum && !spec.enum.includes(raw)) problems.push(`${where}: expected one of ${spec.enum.join(', ')}`);
      void key;
      return raw;
  }
}

/** Parses and validates the settings from an environment; throws ConfigError listing every problem. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const problems: string[] = [];
  const out: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(SETTINGS) as [string, SettingSpec<Kind, readonly string[] | undefined>][]) {
    const raw = env[spec.env];
    if (raw !== undefined && raw !== '') {
      out[key] = parseValue(key, spec, raw, problems);
    } else {
      const d = typeof spec.default === 'function' ? (spec.default as (c: unknown) => unknown)(out) : spec.default;
      out[key] = d;
    }
  }
  out.isProduction = out.nodeEnv === 'production';
  if (out.isProduction) {
    if (!out.biometricKeys) problems.push('BIOMETRIC_KEYS must be set in production (face templates are sealed at rest under it; the development key is refused)');
    if (!out.linkNumberHashKey) problems.push('LINK_NUMBER_HASH_KEY must be set in production (link rows of erased accounts keep a keyed hash of the number under it; the development key is refused)');
    if (!out.jwtPrivateKey) problems.push('JWT_PRIVATE_KEY must be set in production (the generated development key is refused)');
    if (out.smsTransport === 'outbox') problems.push('SMS_TRANSPORT=outbox is a development transport and is refused in production');
    if (out.registrySimFault !== 'none') problems.push('REGISTRY_SIM_FAULT is a test setting and is refused in production');
    if (out.registrySimulator) problems.push('REGISTRY_SIMULATOR=true is refused in production: the simulator lets anyone enrol an identity');
    if (!env.REGISTRY_URL) problems.push('REGISTRY_URL must name the real identity registry in production (the default is the simulator)');
    if (out.adminPassword && String(out.adminPassword).length < 12) problems.push('ADMIN_PASSWORD must have at least 12 characters in production');
  }
  if (out.smsTransport === 'webhook' && !out.smsWebhookUrl) problems.push('SMS_WEBHOOK_URL is required with SMS_TRANSPORT=webhook');
  if ((out.adminIdentifier === '') !== (out.adminPassword === '')) problems.push('ADMIN_IDENTIFIER and ADMIN_PASSWORD are set together or not at all');
  try {
    BiometricKeyRing.from({ biometricKeys: String(out.biometricKeys), biometricActiveKeyId: String(out.biometricActiveKeyId) });
  } catch (e) {
    if (!(e instanceof KeyRingError)) throw e;
    problems.push(e.message);
  }
  if (Number(out.highConfidenceThreshold) < Number(out.matchThreshold)) problems.push('HIGH_CONFIDENCE_THRESHOLD must be >= MATCH_THRESHOLD');
  if (parseRetrySchedule(String(out.webhookRetryScheduleSeconds)) === undefined) problems.push('WEBHOOK_RETRY_SCHEDULE_SECONDS must be comma-separated non-negative numbers of seconds');
  if (out.linkNumberHashKey && Buffer.from(String(out.linkNumberHashKey), 'base64').length !== 32) problems.push('LINK_NUMBER_HASH_KEY must be 32 bytes of base64');
  if (problems.length) throw new ConfigError(problems);
  return Object.freeze(out) as unknown as Config;
}

/** WEBHOOK_RETRY_SCHEDULE_SECONDS as seconds; undefined when malformed (an empty value: no retry). */
export function parseRetrySchedule(raw: string): number[] | undefined {
  if (raw.trim() === '') return [];
  const waits = raw.split(',').map((p) => Number(p.trim()));
  return waits.every((w) => Number.isFinite(w) && w >= 0) ? waits : undefined;
}

let cached: Config | undefined;
/** The process-wide configuration, parsed once from process.env. */
export function config(): Config {
  cached ??= loadConfig(process.env);
  return cached;
}

/** A printable view with secrets masked (for start-up logs). */
export function describeConfig(c: Config): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(SETTINGS) as [keyof Config & string, SettingSpec<Kind>][]) {
    const v = c[key];
    // Any URL may carry credentials or an API key in its query: show scheme, host and path only.
    out[spec.env] = spec.secret && v ? '<secret>' : spec.kind === 'url' || key === 'smsWebhookUrl' ? maskUrl(String(v)) : v;
  }
  return out;
}

function maskUrl(u: string): string {
  try {
    if (!u) return u;
    const url = new URL(u);
    if (url.password) url.password = '***';
    if (url.search) url.search = '?***';
    return url.toString();
  } catch {
    return u;
  }
}
