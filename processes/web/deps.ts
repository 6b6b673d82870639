/**
 * The composition root of the web process: configuration, PostgreSQL, Redis, the job client, metrics,
 * every repository and every service, each built once, here. Route modules receive the services they
 * need (processes/web/routes.ts); nothing else constructs a service. Tests build the same graph against
 * their own database and key prefix.
 */
import type { Knex } from 'knex';
import type { Config } from '../../platform/config.js';
import { createDb } from '../../platform/database/db.js';
import { JobClient } from '../../platform/face-path/job-client.js';
import { HandoffSealer } from '../../platform/face-path/sealing.js';
import { createLogger, type Logger } from '../../platform/logger.js';
import { createRedis, keySpace, redisTarget, type KeySpace, type Redis } from '../../platform/redis/redis.js';
import { AuditEventsRepository } from '../../platform/events/audit.js';
import { UnitOfWork } from '../../platform/database/unit-of-work.js';
import { EmbeddingsRepository } from '../../features/face/embeddings-repository.js';
import { DedupeRepository } from '../../features/dedupe/repository.js';
import { KeyRing } from '../../platform/keys/key-ring.js';
import { keyRingOf } from '../../platform/keys/templates.js';
import { NumberHasher } from '../../platform/keys/number-hash.js';
import { ErasuresRepository } from '../../features/accounts/erasures-repository.js';
import { OperatorsRepository, SessionsRepository } from '../../features/sign-in/operators-repository.js';
import { PreferencesRepository } from '../../features/accounts/preferences-repository.js';
import { RegistryPersonsRepository } from '../../features/registry-simulator/repository.js';
import { SearchLogsRepository } from '../../features/verification/search-logs-repository.js';
import { UsersRepository } from '../../features/users/repository.js';
import { IdentityTokenStore } from '../../features/identity/identity-tokens.js';
import { LoginAttemptStore } from '../../features/sign-in/login-attempts.js';
import { OtpCodeStore } from '../../features/sign-in/otp-codes.js';
import { ProofTokens } from '../../features/verification/proof-tokens.js';
import { RegistryClient } from '../../features/identity/registry-client.js';
import { createSmsTransport } from '../../platform/sms.js';
import { WebhooksRepository } from '../../features/webhooks/repository.js';
import { Metrics } from '../../platform/metrics.js';
import { RegistrySimulator } from '../../features/registry-simulator/simulator.js';
import { AnalyticsService } from '../../features/reports/analytics-service.js';
import { AuditService } from '../../features/audit/service.js';
import { Authorizer } from '../../features/sign-in/authorization-service.js';
import { BillingService } from '../../features/reports/billing-service.js';
import { BiometricAttemptsService, IN_FLIGHT_LEASE_MS } from '../../features/face/biometric-attempts-service.js';
import { BiometricAttemptsStore } from '../../features/face/biometric-attempts-store.js';
import { OperatorMfaRepository } from '../../features/sign-in/operator-mfa-repository.js';
import { MfaService } from '../../features/sign-in/mfa-service.js';
import { DisputeService } from '../../features/disputes/service.js';
import { DedupeService } from '../../features/dedupe/service.js';
import { FaceService } from '../../features/face/face-service.js';
import { HealthService } from '../../features/system/health-service.js';
import { HistoryService } from '../../features/verification/history-service.js';
import { DataExportService } from '../../features/accounts/data-export-service.js';
import { IdentityService } from '../../features/identity/service.js';
import { LivenessService } from '../../features/liveness/service.js';
import { LivenessSessionStore } from '../../features/liveness/session-store.js';
import { OperatorAuthService } from '../../features/sign-in/operator-auth-service.js';
import { StaffDevicesRepository, StaffDeviceTokens } from '../../features/sign-in/staff-devices.js';
import { OperatorService } from '../../features/staff/service.js';
import { OtpService } from '../../features/sign-in/otp-service.js';
import { PreferencesService } from '../../features/accounts/preferences-service.js';
import { SessionService } from '../../features/sign-in/session-service.js';
import { TokenService } from '../../features/sign-in/token-service.js';
import { UserService } from '../../features/accounts/user-service.js';
import { VerificationService } from '../../features/verification/service.js';
import { WebhookService } from '../../features/webhooks/service.js';
import { dataFamilies } from '../data-families.js';
import { WINGS } from '../wings.js';

export interface Repositories {
  users: UsersRepository;
  operators: OperatorsRepository;
  sessions: SessionsRepository;
  searchLogs: SearchLogsRepository;
  embeddings: EmbeddingsRepository;
  preferences: PreferencesRepository;
  registryPersons: RegistryPersonsRepository;
  auditEvents: AuditEventsRepository;
  webhooks: WebhooksRepository;
  operatorMfa: OperatorMfaRepository;
  dedupe: DedupeRepository;
  erasures: ErasuresRepository;
}

/** The product's services, as the routes call them. */
export interface Services {
  sessions: SessionService;
  otp: OtpService;
  operatorAuth: OperatorAuthService;
  operators: OperatorService;
  users: UserService;
  preferences: PreferencesService;
  history: HistoryService;
  disputes: DisputeService;
  dataExport: DataExportService;
  analytics: AnalyticsService;
  billing: BillingService;
  identity: IdentityService;
  liveness: LivenessService;
  verification: VerificationService;
  /** The stand-in national registry, mounted beside the API (api/registry-simulator/). */
  registrySimulator: RegistrySimulator;
  audit: AuditService;
  webhooks: WebhookService;
  mfa: MfaService;
  dedupe: DedupeService;
}

export interface AppDeps {
  config: Config;
  logger: Logger;
  db: Knex;
  redis: Redis;
  keys: KeySpace;
  /** The one key ring (platform/keys): every sealed value of this process. */
  keyRing: KeyRing;
  jobs: JobClient;
  metrics: Metrics;
  tokens: TokenService;
  authorizer: Authorizer;
  health: HealthService;
  face: FaceService;
  repos: Repositories;
  services: Services;
}

function createRepositories(db: Knex, keyRing: KeyRing, numberHasher: NumberHasher): Repositories {
  return {
    erasures: new ErasuresRepository(db),
    users: new UsersRepository(db, numberHasher),
    operators: new OperatorsRepository(db),
    sessions: new SessionsRepository(db),
    searchLogs: new SearchLogsRepository(db),
    embeddings: new EmbeddingsRepository(db, keyRing),
    preferences: new PreferencesRepository(db),
    registryPersons: new RegistryPersonsRepository(db),
    auditEvents: new AuditEventsRepository(db),
    webhooks: new WebhooksRepository(db),
    operatorMfa: new OperatorMfaRepository(db),
    dedupe: new DedupeRepository(db),
  };
}

export function createDeps(config: Config, opts: { logger?: Logger } = {}): AppDeps {
  const logger = opts.logger ?? createLogger({ level: config.runtime.logLevel, format: config.runtime.logFormat, name: 'web' });
  const db = createDb(config.database.url, config.database.poolMax);
  const redis = createRedis(redisTarget(config.redis));
  redis.on('error', (e) => logger.debug({ err: e.message }, 'redis connection error'));
  const keys = keySpace(config.redis.prefix);
  const metrics = new Metrics();
  // Every wing's counters exist from the start, at 0 for their known labels.
  for (const wing of WINGS) for (const spec of wing.metrics ?? []) metrics.declare(spec);
  const tokens = new TokenService(config);
  const jobs = new JobClient({
    redisUrl: redisTarget(config.redis),
    redisPrefix: config.redis.prefix,
    timeoutMs: config.queues.faceJobTimeoutMs,
    workerLivenessMs: config.queues.workerLivenessMs,
    admission: config.queues.failFast
      ? {
          maxWaiting: config.queues.maxWaiting,
          sampleMs: config.queues.failFastSampleMs,
          checkTimeoutMs: 800,
          retryAfterSeconds: config.queues.failFastRetryAfterSeconds,
          onSample: (queue, state) => metrics.queueState(queue, state),
        }
      : undefined,
  });
  const keyRing = keyRingOf(config);
  const repos = createRepositories(db, keyRing, NumberHasher.from(config.keys));
  const identityTokens = new IdentityTokenStore(redis, keys, keyRing);
  const unitOfWork = new UnitOfWork(db);
  const auditEvents = repos.auditEvents;
  const face = new FaceService({ config, embeddings: repos.embeddings, jobs, sealer: new HandoffSealer(keyRing), metrics, logger });
  const proofTokens = new ProofTokens({ config, redis, keys });
  const sessions = new SessionService({
    auditEvents,
    sessions: repos.sessions,
    users: repos.users,
    operators: repos.operators,
    tokens,
    config,
    metrics,
    logger,
  });
  const biometricAttempts = new BiometricAttemptsStore(redis, keys, {
    maxFailures: config.biometrics.maxFailures,
    lockSeconds: config.biometrics.lockSeconds,
    maxLockSeconds: config.biometrics.maxLockSeconds,
  });
  const biometric = new BiometricAttemptsService({
    auditEvents,
    store: biometricAttempts,
    metrics,
    logger,
    inFlightLeaseMs: IN_FLIGHT_LEASE_MS,
  });
  const mfa = new MfaService({
    unitOfWork,
    auditEvents,
    operators: repos.operators,
    mfa: repos.operatorMfa,
    sessionRows: repos.sessions,
    config,
    keyRing,
    metrics,
    logger,
  });
  const registry = new RegistryClient({
    registryUrl: config.registry.url,
    registryTimeoutMs: config.registry.timeoutMs,
    isProduction: config.isProduction,
    maxBodyBytes: config.registry.maxBodyBytes,
    logger,
  });

  const livenessSessions = new LivenessSessionStore(redis, keys, keyRing);
  const liveness = new LivenessService({
    config,
    store: livenessSessions,
    face,
    biometric,
    keyRing,
    metrics,
    logger,
  });

  const sms = createSmsTransport(config);
  const dedupe = new DedupeService({ config, unitOfWork, auditEvents, dedupe: repos.dedupe, keyRing, face, metrics, logger });

  const otp = new OtpService({ config, auditEvents, users: repos.users, codes: new OtpCodeStore(redis, keys), tokens, sessions, sms, metrics, logger });
  const userService = new UserService({
    config,
    unitOfWork,
    auditEvents,
    users: repos.users,
    sessionRows: repos.sessions,
    embeddings: repos.embeddings,
    erasures: repos.erasures,
    erasure: dataFamilies({ db, config, identityTokens, biometricAttempts, livenessSessions, otp }),
    proofTokens,
    jobs,
    logger,
    sms,
  });
  const preferencesService = new PreferencesService({ unitOfWork, auditEvents, preferences: repos.preferences });
  const historyService = new HistoryService({ searchLogs: repos.searchLogs });
  const services: Services = {
    sessions,
    otp,
    operatorAuth: new OperatorAuthService({
      unitOfWork,
      auditEvents,
      operators: repos.operators,
      sessionRows: repos.sessions,
      attempts: new LoginAttemptStore(redis, keys),
      config,
      sessions,
      mfa,
      devices: new StaffDevicesRepository(db),
      deviceTokens: new StaffDeviceTokens(keyRing),
      metrics,
      logger,
    }),
    operators: new OperatorService({
      unitOfWork,
      auditEvents,
      operators: repos.operators,
      sessionRows: repos.sessions,
      searchLogs: repos.searchLogs,
      logger,
    }),
    users: userService,
    preferences: preferencesService,
    history: historyService,
    dataExport: new DataExportService({
      auditEvents,
      userService,
      users: repos.users,
      embeddings: repos.embeddings,
      searchLogs: repos.searchLogs,
      history: historyService,
      preferences: preferencesService,
      config,
      redis,
      keys,
      proofTokens,
      sms,
      logger,
    }),
    disputes: new DisputeService({ unitOfWork, auditEvents, searchLogs: repos.searchLogs }),
    analytics: new AnalyticsService({ searchLogs: repos.searchLogs }),
    billing: new BillingService({ searchLogs: repos.searchLogs, config }),
    identity: new IdentityService({
      config,
      unitOfWork,
      auditEvents,
      users: repos.users,
      embeddings: repos.embeddings,
      store: identityTokens,
      metrics,
      logger,
      face,
      registry,
      dedupe,
      keyRing,
      biometric,
      liveness,
    }),
    liveness,
    verification: new VerificationService({
      config,
      unitOfWork,
      auditEvents,
      users: repos.users,
      searchLogs: repos.searchLogs,
      embeddings: repos.embeddings,
      proofTokens,
      face,
      biometric,
      liveness,
      metrics,
      logger,
    }),
    registrySimulator: new RegistrySimulator(repos.registryPersons, { maxImagePixels: config.http.maxImagePixels }),
    audit: new AuditService({ auditEvents: repos.auditEvents }),
    dedupe,
    webhooks: new WebhookService({ unitOfWork, auditEvents, webhooks: repos.webhooks, config, keyRing }),
    mfa,
  };

  return {
    config,
    logger,
    db,
    redis,
    keys,
    keyRing,
    jobs,
    metrics,
    tokens,
    authorizer: new Authorizer({ sessions: repos.sessions, users: repos.users, operators: repos.operators }, tokens, {
      staffMfa: config.operators.staffMfa,
      staffSessionMaxSeconds: config.operators.staffSessionMaxSeconds,
    }),
    health: new HealthService({ config, database: unitOfWork, redis, metrics, links: (ms) => jobs.linksAnswer(ms) }),
    face,
    repos,
    services,
  };
}

export async function closeDeps(deps: AppDeps): Promise<void> {
  deps.health.stopPoller();
  await deps.jobs.close();
  await deps.redis.quit().catch(() => deps.redis.disconnect());
  await deps.db.destroy();
}
