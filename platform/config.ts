/**
 * The one typed, validated configuration of every process (web, face, search, scripts).
 * The floor's own settings are declared once below; each wing declares its own group(s) in its manifest
 * (features/<wing>/manifest.ts, platform/wing.ts), and processes/config.ts composes them with these
 * before anything reads the configuration. A setting is declared once: its environment variable,
 * type, default and meaning. `docs/configuration.md` is generated from the composed table
 * (scripts/gen-config-doc.ts).
 */
import { createHash, createPublicKey } from 'node:crypto';
import { KeyRing, KeyRingError } from './keys/key-ring.js';

/** Settings parsed so far, by group, as seen by a default that depends on them. */
export type Parsed = Record<string, Record<string, unknown> | undefined>;
type Kind = 'string' | 'int' | 'number' | 'bool' | 'url';

export interface SettingSpec<K extends Kind, E extends readonly string[] | undefined = undefined> {
  env: string;
  kind: K;
  /** Default for local use; a function receives the settings parsed so far (declaration order: the floor's groups come first). */
  default?: unknown;
  enum?: E;
  min?: number;
  max?: number;
  doc: string;
  /** Never printed: config dumps show `set` or `unset` (a key: by its fingerprint), docs `<secret>`. */
  secret?: boolean;
}

/** Declares one setting (the floor's table below, a wing's manifest). */
export function s<K extends Kind, const E extends readonly string[] | undefined = undefined>(spec: SettingSpec<K, E>): SettingSpec<K, E> {
  return spec;
}

type AnySpec = SettingSpec<Kind, readonly string[] | undefined>;
/** One group of settings: `config.<group>.<key>`. */
export type SettingGroup = Record<string, AnySpec>;

/**
 * A wing's group of settings as its manifest declares it: the section title of docs/configuration.md,
 * the settings, and the checks across them (or in production) that a single setting cannot express.
 * `check` pushes one line per problem; every problem is reported at once.
 */
export interface WingSettingGroup {
  title: string;
  settings: SettingGroup;
  check?: (c: Config, problems: string[], env: NodeJS.ProcessEnv) => void;
}

/**
 * The wings' setting groups, by name, for the type of `Config` only: each wing's manifest adds its
 * own (`declare module '../../platform/config.js' { interface WingSettings { webhooks: typeof settings } }`),
 * so the floor knows their types without importing a wing. At run time processes/config.ts registers
 * the same groups (registerSettingGroups); test/house.test.ts checks the two agree.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface WingSettings {}

/** What each of the floor's groups is about: sections of docs/configuration.md. */
export const GROUP_TITLES = {
  runtime: 'Runtime and logs',
  http: 'HTTP server',
  database: 'PostgreSQL',
  redis: 'Redis',
  security: 'Access tokens',
  keys: 'Keys and sealed data',
  sms: 'SMS delivery',
  queues: 'Queues, fail-fast and the upstream worker',
  supervisor: '`npm start` supervision',
  protection: 'Retention sweep and audit events',
} as const;

/** The floor's settings by group: `config.redis.url`, `config.queues.faceJobTimeoutMs`, ... */
export const SETTINGS = {
  runtime: {
    nodeEnv: s({
      env: 'NODE_ENV',
      kind: 'string',
      default: 'production',
      enum: ['development', 'test', 'production'] as const,
      doc: 'Runtime mode. Unset means `production`, which refuses development secrets, the SMS outbox and the registry simulator; `npm start`, `npm test` and the developer scripts set `development` (or `test`) explicitly unless NODE_ENV is given.',
    }),
    logLevel: s({
      env: 'LOG_LEVEL',
      kind: 'string',
      default: 'info',
      enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const,
      doc: 'pino log level.',
    }),
    logFormat: s({
      env: 'LOG_FORMAT',
      kind: 'string',
      default: (c: Parsed) => (c.runtime?.nodeEnv === 'development' ? 'pretty' : 'json'),
      enum: ['pretty', 'json'] as const,
      doc: 'Log lines: `pretty` (pino-pretty: time, level, process, message and fields on one readable line; the default in development) or `json` (one JSON object a line, for log collectors; the default in test and production).',
    }),
    dependencyPollIntervalMs: s({
      env: 'DEPENDENCY_POLL_INTERVAL_MS',
      kind: 'int',
      default: 15_000,
      min: 100,
      doc: 'Refresh period of the `service_dependency_up` gauge.',
    }),
  },
  http: {
    metricsToken: s({
      env: 'METRICS_TOKEN',
      kind: 'string',
      default: '',
      secret: true,
      doc: 'When set, `GET /metrics` answers only `Authorization: Bearer <METRICS_TOKEN>` (401 otherwise): the exposition names outcomes, queues and dependencies an outsider should not read. Required in production (at least 32 characters); ops/prometheus/prometheus.yml sends it from a file.',
    }),
    port: s({ env: 'PORT', kind: 'int', default: 3000, min: 0, max: 65535, doc: 'HTTP port of the web process (API and registry simulator).' }),
    host: s({ env: 'HOST', kind: 'string', default: '127.0.0.1', doc: 'Interface the web process listens on.' }),
    trustProxy: s({ env: 'TRUST_PROXY', kind: 'bool', default: false, doc: 'Take the client IP from `X-Forwarded-For` (only behind a trusted proxy).' }),
    maxUploadBytes: s({
      env: 'MAX_UPLOAD_BYTES',
      kind: 'int',
      default: 8 * 1024 * 1024,
      min: 1024,
      doc: 'Largest accepted upload; beyond it 413 `payload_too_large`.',
    }),
    maxImagePixels: s({
      env: 'MAX_IMAGE_PIXELS',
      kind: 'int',
      default: 40_000_000,
      min: 10_000,
      doc: 'Largest decoded image (pixels); beyond it 400 `invalid_image`.',
    }),
    shutdownDrainMs: s({
      env: 'SHUTDOWN_DRAIN_MS',
      kind: 'int',
      default: 15_000,
      min: 0,
      doc: 'On SIGTERM/SIGINT the web process stops accepting connections and waits up to this long for in-flight requests to be answered before it closes the rest (default: above FACE_JOB_TIMEOUT_MS, so an awaited face job can finish).',
    }),
  },
  database: {
    url: s({ env: 'DATABASE_URL', kind: 'url', default: 'postgres://postgres@127.0.0.1:5432/faceid', doc: 'PostgreSQL, the source of truth.' }),
    migrationUrl: s({
      env: 'MIGRATION_DATABASE_URL',
      kind: 'url',
      default: '',
      doc: "The owner role's connection for `npm run migrate` (the Procfile's `release`) and `create-admin`, when DATABASE_URL is the application's least-privilege login (a member of `faceid_app`, docs/security.md). Empty: DATABASE_URL.",
    }),
    poolMax: s({ env: 'DATABASE_POOL_MAX', kind: 'int', default: 10, min: 1, max: 200, doc: 'Connections per process.' }),
  },
  redis: {
    url: s({
      env: 'REDIS_URL',
      kind: 'url',
      default: 'redis://127.0.0.1:6379',
      doc: 'Redis: queues, one-time codes, single-use tokens, rate limits. In production it must carry the password (`redis://:<password>@host:6379`, `rediss://` for TLS): a Redis without one is refused at start.',
    }),
    prefix: s({
      env: 'REDIS_PREFIX',
      kind: 'string',
      default: 'faceid',
      doc: 'Prefix of every Redis key and BullMQ queue of this deployment (tests use their own).',
    }),
    sentinels: s({
      env: 'REDIS_SENTINELS',
      kind: 'string',
      default: '',
      doc: 'Redis Sentinels as `host:port,host:port,...`: when set, every Redis connection (queues, workers, tokens, rate limits) asks them for the master of REDIS_SENTINEL_NAME and follows it across a failover; REDIS_URL then gives only the password, database and `rediss://` (TLS), not the address (docs/deployment.md).',
    }),
    sentinelName: s({
      env: 'REDIS_SENTINEL_NAME',
      kind: 'string',
      default: 'faceid',
      doc: 'Name of the master the Sentinels monitor (`sentinel monitor <name> ...`), used with REDIS_SENTINELS.',
    }),
  },
  security: {
    jwtPrivateKey: s({
      env: 'JWT_PRIVATE_KEY',
      kind: 'string',
      default: '',
      secret: true,
      doc: 'PKCS#8 PEM EdDSA (Ed25519) key signing access tokens. Empty: a development key is generated in `var/dev-jwt-key.pem` (refused in production).',
    }),
    jwtPreviousPublicKeys: s({
      env: 'JWT_PREVIOUS_PUBLIC_KEYS',
      kind: 'string',
      default: '',
      // Public keys only, but a private one pasted here must not reach a log before it is refused.
      secret: true,
      doc: 'Key ring for rotation: SPKI PEM public keys of earlier signing keys, concatenated. Tokens name their key by `kid` (a thumbprint); tokens of these keys stay valid until they expire, so a rotation logs nobody out. Only JWT_PRIVATE_KEY signs. A private key here is refused at start (it would sign tokens for whoever reads this setting, which is not handled as a secret): give its public half.',
    }),
    jwtIssuer: s({ env: 'JWT_ISSUER', kind: 'string', default: 'faceid', doc: 'Issuer claim of access tokens.' }),
    accessTokenTtlSeconds: s({ env: 'ACCESS_TOKEN_TTL_SECONDS', kind: 'int', default: 900, min: 30, doc: 'Access token lifetime.' }),
    refreshTokenTtlSeconds: s({
      env: 'REFRESH_TOKEN_TTL_SECONDS',
      kind: 'int',
      default: 30 * 24 * 3600,
      min: 60,
      doc: 'Refresh token lifetime (rotated on every refresh).',
    }),
  },
  keys: {
    biometricKeys: s({
      env: 'BIOMETRIC_KEYS',
      kind: 'string',
      default: '',
      secret: true,
      doc: 'The key ring (`kid:base64(32 bytes),kid2:...`): every sealed value (face templates and captures, face-path hand-offs, search snapshots, staff TOTP secrets, webhook secrets) is sealed under a data key derived from one of these for its purpose (AES-256-GCM, platform/keys/README.md). Empty: a fixed development key (refused in production). Rotation: docs/data-protection.md.',
    }),
    biometricActiveKeyId: s({
      env: 'BIOMETRIC_ACTIVE_KEY_ID',
      kind: 'string',
      default: '',
      doc: 'The key of BIOMETRIC_KEYS that seals new data (default: the last one listed); the others only open.',
    }),
    linkNumberHashKey: s({
      env: 'LINK_NUMBER_HASH_KEY',
      kind: 'string',
      default: '',
      secret: true,
      doc: 'Key (base64, 32 bytes) of the keyed hash (HMAC-SHA256) that link rows keep of a NIN/BVN: an erased account keeps only this hash, so the number is still recognised. Never rotated (a new key forgets every erased number). Empty: a fixed development key; production refuses it and any key under 32 bytes (11-digit numbers are few enough to hash them all under a short key).',
    }),
    mfaEncryptionKey: s({
      env: 'MFA_ENCRYPTION_KEY',
      kind: 'string',
      default: '',
      secret: true,
      doc: 'Deprecated: staff TOTP secrets are sealed under the key ring (BIOMETRIC_KEYS). Still read: the key (32 bytes, base64 or hex) earlier versions sealed TOTP secrets under, so they open until `npm run rotate-biometric-key` re-seals them under the ring; then remove it.',
    }),
  },
  sms: {
    transport: s({
      env: 'SMS_TRANSPORT',
      kind: 'string',
      default: (c: Parsed) => (c.runtime?.nodeEnv === 'production' ? 'webhook' : 'outbox'),
      enum: ['outbox', 'webhook'] as const,
      doc: '`outbox` appends codes to a file (development, tests); `webhook` POSTs them to the SMS gateway.',
    }),
    outboxFile: s({
      env: 'SMS_OUTBOX_FILE',
      kind: 'string',
      default: 'var/sms-outbox.jsonl',
      doc: 'Outbox file, one JSON line `{ to, code, sentAt }` per code.',
    }),
    webhookUrl: s({
      env: 'SMS_WEBHOOK_URL',
      kind: 'string',
      default: '',
      doc: 'SMS gateway endpoint for `SMS_TRANSPORT=webhook`; `https:` in production (codes and phone numbers travel in it).',
    }),
    webhookToken: s({
      env: 'SMS_WEBHOOK_TOKEN',
      kind: 'string',
      default: '',
      secret: true,
      doc: 'Bearer token sent to the SMS gateway (`Authorization: Bearer ...`), when it wants one.',
    }),
    webhookTimeoutMs: s({
      env: 'SMS_WEBHOOK_TIMEOUT_MS',
      kind: 'int',
      default: 5000,
      min: 100,
      doc: 'Timeout of one SMS gateway call; beyond it the code request answers 503 and can be retried at once.',
    }),
  },
  queues: {
    faceJobTimeoutMs: s({
      env: 'FACE_JOB_TIMEOUT_MS',
      kind: 'int',
      default: 10_000,
      min: 100,
      doc: 'How long the API awaits a face or search job before 503 `face_engine_unavailable`.',
    }),
    failFast: s({
      env: 'FAIL_FAST',
      kind: 'bool',
      default: true,
      doc: 'Refuse face work at once (503 with Retry-After, nothing enqueued) when no worker is on its queue, Redis is unreachable or FACE_QUEUE_MAX_WAITING jobs wait; false: enqueue and wait up to FACE_JOB_TIMEOUT_MS (the test harness uses false so that the timeout and withdrawal path stays exercised).',
    }),
    maxWaiting: s({
      env: 'FACE_QUEUE_MAX_WAITING',
      kind: 'int',
      default: 50,
      min: 1,
      doc: 'Jobs waiting on one face/search queue beyond which face routes answer 503 `face_engine_unavailable` with Retry-After at once (a bound on waiting work).',
    }),
    failFastSampleMs: s({
      env: 'FAIL_FAST_SAMPLE_MS',
      kind: 'int',
      default: 500,
      min: 0,
      doc: 'How long a healthy sample of the queues (workers alive, jobs waiting) is reused by the fail-fast check; an unhealthy one is never reused.',
    }),
    failFastRetryAfterSeconds: s({
      env: 'FAIL_FAST_RETRY_AFTER_SECONDS',
      kind: 'int',
      default: 5,
      min: 1,
      doc: 'Retry-After of the fail-fast 503s (no worker, Redis unreachable, queue full).',
    }),
    workerLivenessMs: s({
      env: 'WORKER_LIVENESS_MS',
      kind: 'int',
      default: 1500,
      min: 300,
      max: 10_000,
      doc: "How long a face or search process's liveness key lives in Redis (refreshed three times per period, from a thread apart from the models). A request whose stage was running on a process whose key has expired (the process was killed) answers 503 `face_engine_unavailable` with Retry-After at once (`details.reason` `worker_lost`), within about this period plus a third, instead of at FACE_JOB_TIMEOUT_MS; the API checks every third of it while it awaits a stage (platform/face-path/worker-liveness.ts). Within max(10 s, 6 periods) of the API's own Redis connection failing (a fail-over), such a lapse answers 503 `dependency_unavailable` (`queue_store_failover`) instead.",
    }),
    upstreamWorkerInWeb: s({
      env: 'UPSTREAM_WORKER_IN_WEB',
      kind: 'bool',
      default: true,
      doc: "Run the background queues' workers (the `upstream` queue's retention sweep, the accounts wing's delayed bankAccount confirmations, the webhook deliveries: every wing's `background` worker) inside the web process; `false` when `processes/upstream.ts` (`npm run start:upstream`) runs them instead.",
    }),
  },
  supervisor: {
    pid: s({
      env: 'SUPERVISOR_PID',
      kind: 'int',
      default: 0,
      min: 0,
      doc: "Set by `npm start` for its children: the supervisor's process id; a child whose supervisor is gone stops (no orphan keeps a port). 0: not supervised.",
    }),
    statusFile: s({
      env: 'SUPERVISOR_STATUS_FILE',
      kind: 'string',
      default: '',
      doc: "Set by `npm start` for its children: the supervisor's status file (restarts, crash loops), reported by GET /health as `processes`.",
    }),
    serviceFile: s({
      env: 'FACEID_SERVICE_FILE',
      kind: 'string',
      default: 'var/run/service.json',
      doc: 'Where `npm start` writes its pid and URL, read by the scripts run beside the service (`npm run seed:registry`).',
    }),
    restartBackoffInitialMs: s({
      env: 'RESTART_BACKOFF_INITIAL_MS',
      kind: 'int',
      default: 500,
      min: 0,
      doc: '`npm start`: wait before restarting a child that died, doubled after each failure in a row.',
    }),
    restartBackoffMaxMs: s({ env: 'RESTART_BACKOFF_MAX_MS', kind: 'int', default: 30_000, min: 0, doc: '`npm start`: longest wait before a restart.' }),
    stableAfterMs: s({
      env: 'STABLE_AFTER_MS',
      kind: 'int',
      default: 30_000,
      min: 0,
      doc: '`npm start`: a child up this long starts the failure count again.',
    }),
    crashLoopRestarts: s({
      env: 'CRASH_LOOP_RESTARTS',
      kind: 'int',
      default: 5,
      min: 1,
      doc: '`npm start`: restarts within CRASH_LOOP_WINDOW_MS that mark a crash loop (logged, shown in GET /health); restarts go on at the backoff.',
    }),
    crashLoopWindowMs: s({ env: 'CRASH_LOOP_WINDOW_MS', kind: 'int', default: 60_000, min: 1000, doc: '`npm start`: the window of CRASH_LOOP_RESTARTS.' }),
  },
  protection: {
    retentionDaysAuditEvents: s({
      env: 'RETENTION_DAYS_AUDIT_EVENTS',
      kind: 'int',
      default: 2190,
      min: 365,
      doc: 'Days an AuditEvent is kept (6 years: accountability for processing, NDPA 2023 s.39, and the limitation period). At least 365: the database function that ages audit rows out refuses less (docs/data-protection.md).',
    }),
    retentionSweepIntervalSeconds: s({
      env: 'RETENTION_SWEEP_INTERVAL_SECONDS',
      kind: 'int',
      default: 3600,
      min: 1,
      doc: 'How often the retention sweep (a BullMQ repeatable job on the upstream worker) purges every data family past its retention period and finishes the erasures whose Redis step failed (platform/retention/README.md).',
    }),
  },
} as const;

/** The composed table's type: the floor's groups and the wings' (WingSettings). */
type Table = typeof SETTINGS & WingSettings;
type ValueOf<S> = S extends SettingSpec<Kind, infer E> ? (E extends readonly (infer V)[] ? V : KindValue<S>) : never;
type KindValue<S> = S extends { kind: 'int' | 'number' } ? number : S extends { kind: 'bool' } ? boolean : string;

export type Config = { readonly [G in keyof Table]: { readonly [K in keyof Table[G]]: ValueOf<Table[G][K]> } } & {
  readonly isProduction: boolean;
};

const wingGroups = new Map<string, WingSettingGroup & { wing: string }>();

/**
 * Adds wings' setting groups to the table (processes/config.ts, once, from the wings' manifests).
 * A group name is taken once, floor included. Registering again the same group is a no-op.
 */
export function registerSettingGroups(wing: string, groups: Record<string, WingSettingGroup>): void {
  for (const [name, group] of Object.entries(groups)) {
    const had = wingGroups.get(name);
    if (had?.settings === group.settings) continue;
    if (name in SETTINGS || had) throw new Error(`Setting group "${name}" of wing ${wing} is already declared by ${had ? `wing ${had.wing}` : 'the floor'}`);
    wingGroups.set(name, { ...group, wing });
    // A configuration read before this group was known lacks it: read it again when next asked.
    cached = undefined;
  }
}

/** Every group of the composed table in order: the floor's, then the wings' as processes/config.ts lists them. */
export function settingGroups(): Array<{ group: keyof Table; title: string; settings: SettingGroup; wing?: string }> {
  return [
    ...Object.entries(SETTINGS).map(([group, settings]) => ({
      group: group as keyof Table,
      title: GROUP_TITLES[group as keyof typeof GROUP_TITLES],
      settings: settings as SettingGroup,
    })),
    ...[...wingGroups].map(([group, g]) => ({ group: group as keyof Table, title: g.title, settings: g.settings, wing: g.wing })),
  ];
}

/** Every setting with its group and key, in declaration order. */
export function eachSetting(): Array<{ group: keyof Table; key: string; spec: AnySpec }> {
  return settingGroups().flatMap(({ group, settings }) => Object.entries(settings).map(([key, spec]) => ({ group, key, spec })));
}

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
  const out: Record<string, Record<string, unknown>> = {};
  for (const { group, key, spec } of eachSetting()) {
    const into = (out[group] ??= {});
    const raw = env[spec.env];
    if (raw !== undefined && raw !== '') {
      into[key] = parseValue(key, spec, raw, problems);
    } else {
      into[key] = typeof spec.default === 'function' ? (spec.default as (c: Parsed) => unknown)(out) : spec.default;
    }
  }
  const { runtime, http, security, keys, sms, redis } = out as unknown as Omit<Config, 'isProduction'>;
  const isProduction = runtime.nodeEnv === 'production';
  if (isProduction) {
    if (!keys.linkNumberHashKey)
      problems.push(
        'LINK_NUMBER_HASH_KEY must be set in production (link rows of erased accounts keep a keyed hash of the number under it; the development key is refused)',
      );
    if (!keys.biometricKeys)
      problems.push('BIOMETRIC_KEYS must be set in production (face templates are sealed at rest under it; the development key is refused)');
    if (!security.jwtPrivateKey) problems.push('JWT_PRIVATE_KEY must be set in production (the generated development key is refused)');
    if (sms.transport === 'outbox') problems.push('SMS_TRANSPORT=outbox is a development transport and is refused in production');
    if (sms.webhookUrl && !String(sms.webhookUrl).startsWith('https:'))
      problems.push('SMS_WEBHOOK_URL must be https: in production (one-time codes and phone numbers travel in it)');
    if (String(http.metricsToken).length < 32)
      problems.push('METRICS_TOKEN must be set in production (at least 32 characters): GET /metrics is otherwise readable by anyone');
    if (keys.linkNumberHashKey && Buffer.from(String(keys.linkNumberHashKey), 'base64').length < 32)
      problems.push(
        'LINK_NUMBER_HASH_KEY must be at least 32 bytes (base64) in production: under a short key the hashes of erased 11-digit numbers can be reversed by trying every number',
      );
    if (!redisUrlHasPassword(String(redis.url)))
      problems.push(
        'REDIS_URL must carry the Redis password in production (redis://:<password>@host:6379, or rediss://<user>:<password>@...; with REDIS_SENTINELS the same password authenticates the master and the Sentinels): one-time codes, tokens and queued jobs are in Redis',
      );
  }
  if (/PRIVATE KEY/.test(String(security.jwtPreviousPublicKeys)))
    problems.push(
      'JWT_PREVIOUS_PUBLIC_KEYS holds a private key: give the public key (SPKI PEM, `openssl pkey -pubout`) of each earlier signing key, never the private one',
    );
  if (sms.transport === 'webhook' && !sms.webhookUrl) problems.push('SMS_WEBHOOK_URL is required with SMS_TRANSPORT=webhook');
  try {
    KeyRing.from(keys);
  } catch (e) {
    if (!(e instanceof KeyRingError)) throw e;
    problems.push(e.message);
  }
  for (const entry of String(redis.sentinels)
    .split(',')
    .filter((e) => e.trim() !== '')) {
    if (!/^[^\s:]+:\d{1,5}$/.test(entry.trim())) problems.push(`REDIS_SENTINELS=${JSON.stringify(redis.sentinels)}: expected host:port,host:port,...`);
  }
  const parsed = { ...out, isProduction } as unknown as Config;
  for (const group of wingGroups.values()) group.check?.(parsed, problems, env);
  if (problems.length) throw new ConfigError(problems);
  for (const group of Object.values(out)) Object.freeze(group);
  return Object.freeze(parsed);
}

function redisUrlHasPassword(url: string): boolean {
  try {
    return new URL(url).password !== '';
  } catch {
    return false;
  }
}

/** OTP_ALLOWED_COUNTRY_CODES as calling codes without `+`; undefined when malformed or empty. */
export function parseCountryCodes(raw: string): string[] | undefined {
  const codes = raw
    .split(',')
    .map((c) => c.trim().replace(/^\+/, ''))
    .filter((c) => c !== '');
  return codes.length > 0 && codes.every((c) => /^[1-9][0-9]{0,2}$/.test(c)) ? codes : undefined;
}

let cached: Config | undefined;
/** The process-wide configuration, parsed once from process.env. */
export function config(): Config {
  cached ??= loadConfig(process.env);
  return cached;
}

/** The environment variables of settings that are set (not empty) in `env`: given, rather than defaulted. */
export function givenSettings(env: NodeJS.ProcessEnv = process.env): Set<string> {
  return new Set(
    eachSetting()
      .map(({ spec }) => spec.env)
      .filter((name) => (env[name] ?? '') !== ''),
  );
}

/**
 * A child process's environment: this process's own, with `settings` over it. A launcher's layout
 * chooses some settings for its children (the servers it started, their ports); the children read them
 * as their configuration, like any other setting.
 */
export function environmentWith(settings: Record<string, string>): NodeJS.ProcessEnv {
  return { ...process.env, ...settings };
}

/** A printable view with secrets masked (for start-up logs). */
export function describeConfig(c: Config): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { group, key, spec } of eachSetting()) {
    const v = (c[group] as Record<string, unknown>)[key];
    // Any URL may carry credentials or an API key in its query: show scheme, host and path only.
    out[spec.env] = spec.secret ? secretShown(spec.env, String(v ?? '')) : spec.kind === 'url' || spec.env === 'SMS_WEBHOOK_URL' ? maskUrl(String(v)) : v;
  }
  return out;
}

/**
 * How a start-up line shows a secret setting: `unset`, `set`, or for a key what names it without
 * revealing it (the signing keys by their RFC 7638 thumbprint, the `kid` of the tokens they sign; the
 * key ring by its key ids). Never a digest of a password-like value: that could be guessed offline.
 */
function secretShown(env: string, value: string): string {
  if (value === '') return 'unset';
  if (env === 'JWT_PRIVATE_KEY' || env === 'JWT_PREVIOUS_PUBLIC_KEYS') {
    const blocks = value.replace(/\\n/g, '\n').match(/-----BEGIN [A-Z ]+-----[\s\S]+?-----END [A-Z ]+-----/g) ?? [];
    const kids = blocks.map((pem) => {
      try {
        const jwk = createPublicKey(pem).export({ format: 'jwk' });
        return createHash('sha256')
          .update(JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x }))
          .digest('base64url');
      } catch {
        return 'unreadable';
      }
    });
    return kids.length ? `set (kid ${kids.join(', ')})` : 'set';
  }
  if (env === 'BIOMETRIC_KEYS') {
    const ids = value.split(',').map((entry) => entry.split(':')[0]!.trim());
    return `set (key ids ${ids.join(', ')})`;
  }
  return 'set';
}

/**
 * What a process logs of its configuration at start. JSON logs (production) carry every setting, for
 * the record; readable logs (development) only the settings that differ from their defaults, so that a
 * newcomer reads a line, not a wall (LOG_LEVEL=debug logs them all). Secrets masked either way.
 */
export function logConfigAtStart(logger: { info(obj: object, msg: string): void; debug(obj: object, msg: string): void }, c: Config, name: string): void {
  const all = describeConfig(c);
  if (c.runtime.logFormat === 'json') {
    logger.info({ config: all }, `${name} starting`);
    return;
  }
  const defaults = describeConfig(loadConfig({ NODE_ENV: c.runtime.nodeEnv }));
  const changed = Object.fromEntries(Object.entries(all).filter(([env, v]) => JSON.stringify(v) !== JSON.stringify(defaults[env])));
  logger.info({ settings: changed }, `${name} starting (${c.runtime.nodeEnv}; the settings off their defaults, all of them at LOG_LEVEL=debug)`);
  logger.debug({ config: all }, `${name} configuration`);
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
