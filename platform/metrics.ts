/**
 * Prometheus metrics (prom-client): default process metrics, HTTP requests and durations by route
 * template and status, business outcomes, and `service_dependency_up{dependency}` kept fresh by the
 * background poller in features/system/health-service.ts.
 */
import client from 'prom-client';

export const DEPENDENCIES = ['db', 'cache', 'face_engine', 'identity_registry', 'vector_index'] as const;
export type Dependency = (typeof DEPENDENCIES)[number];

export class Metrics {
  readonly registry = new client.Registry();
  private readonly httpRequests: client.Counter<'method' | 'route' | 'status'>;
  private readonly httpDuration: client.Histogram<'method' | 'route' | 'status'>;
  private readonly outcomes: client.Counter<'endpoint' | 'outcome'>;
  private readonly dependencyUp: client.Gauge<'dependency'>;
  private readonly stageDuration: client.Histogram<'stage'>;
  private readonly queueJobs: client.Gauge<'queue' | 'state'>;
  private readonly queueWorkers: client.Gauge<'queue'>;
  private readonly webhookAttempts: client.Counter<'outcome'>;
  private readonly dedupeCasesOpened: client.Counter<'kind'>;
  private readonly dedupeDecisions: client.Counter<'status'>;
  private readonly operatorLocks: client.Counter<'role' | 'kind'>;
  private readonly livenessModeGauge: client.Gauge<'mode'>;

  constructor() {
    client.collectDefaultMetrics({ register: this.registry });
    // prom-client's three `nodejs_active_*_total` gauges break Prometheus' naming rule (`_total` is for
    // counters: `promtool check metrics` refuses them); each is the sum of its per-type gauge
    // (`nodejs_active_handles{type}`, ...), which stays: sum() by that name gives the same figure.
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
      this.registry.removeSingleMetric(name);
    }
    this.httpRequests = new client.Counter({
      name: 'http_requests_total',
      help: 'HTTP requests by method, route template and status',
      labelNames: ['method', 'route', 'status'],
      registers: [this.registry],
    });
    this.httpDuration = new client.Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request duration by method, route template and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [this.registry],
    });
    this.outcomes = new client.Counter({
      name: 'verification_outcomes_total',
      help: 'Business outcomes by endpoint (identify, verify_self, verify_face, link, otp, ...) and outcome',
      labelNames: ['endpoint', 'outcome'],
      registers: [this.registry],
    });
    this.stageDuration = new client.Histogram({
      name: 'face_stage_duration_seconds',
      help: 'Face pipeline stage duration as measured by the workers (liveness, embed, search)',
      labelNames: ['stage'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [this.registry],
    });
    this.dependencyUp = new client.Gauge({
      name: 'service_dependency_up',
      help: '1 when the dependency answered its last check, else 0 (refreshed by a background poller)',
      labelNames: ['dependency'],
      registers: [this.registry],
    });
    for (const d of DEPENDENCIES) this.dependencyUp.set({ dependency: d }, 0);
    this.queueJobs = new client.Gauge({
      name: 'face_queue_jobs',
      help: 'Jobs on each face/search queue by state (waiting, active), as last sampled by the fail-fast admission check',
      labelNames: ['queue', 'state'],
      registers: [this.registry],
    });
    this.webhookAttempts = new client.Counter({
      name: 'webhook_delivery_attempts_total',
      help: 'Webhook delivery attempts by outcome: succeeded, retry (failed; another attempt follows), failed (the last attempt failed: the delivery is given up)',
      labelNames: ['outcome'],
      registers: [this.registry],
    });
    for (const outcome of ['succeeded', 'retry', 'failed']) this.webhookAttempts.inc({ outcome }, 0);
    this.dedupeCasesOpened = new client.Counter({
      name: 'dedupe_cases_opened_total',
      help: 'Duplicate-identity cases opened at link, by kind: duplicate, possible_duplicate, watchlist',
      labelNames: ['kind'],
      registers: [this.registry],
    });
    for (const kind of ['duplicate', 'possible_duplicate', 'watchlist']) this.dedupeCasesOpened.inc({ kind }, 0);
    this.dedupeDecisions = new client.Counter({
      name: 'dedupe_case_decisions_total',
      help: 'Duplicate-identity cases decided by an administrator, by decision: confirmed, dismissed',
      labelNames: ['status'],
      registers: [this.registry],
    });
    for (const status of ['confirmed', 'dismissed']) this.dedupeDecisions.inc({ status }, 0);
    this.operatorLocks = new client.Counter({
      name: 'operator_locks_total',
      help: 'Staff accounts locked by failed sign-ins, by role (operator, administrator) and kind: lapsing (an administrator, for a window) or until_reset',
      labelNames: ['role', 'kind'],
      registers: [this.registry],
    });
    for (const role of ['operator', 'administrator']) for (const kind of ['lapsing', 'until_reset']) this.operatorLocks.inc({ role, kind }, 0);
    this.livenessModeGauge = new client.Gauge({
      name: 'faceid_liveness_mode',
      help: 'The LIVENESS_MODE in force (1) and the other (0): passive accepts a single capture, challenge requires a liveness session',
      labelNames: ['mode'],
      registers: [this.registry],
    });
    this.queueWorkers = new client.Gauge({
      name: 'face_queue_workers',
      help: 'Workers connected to each face/search queue, as last sampled by the fail-fast admission check',
      labelNames: ['queue'],
      registers: [this.registry],
    });
  }

  /** The LIVENESS_MODE in force: 1 for it, 0 for the other (an alert reads `faceid_liveness_mode{mode="passive"} == 1` in production). */
  livenessMode(mode: 'passive' | 'challenge'): void {
    for (const m of ['passive', 'challenge'] as const) this.livenessModeGauge.set({ mode: m }, m === mode ? 1 : 0);
  }

  /** One webhook delivery attempt ended: succeeded, retry (failed, another attempt follows) or failed (the last). */
  webhookAttempt(outcome: 'succeeded' | 'retry' | 'failed'): void {
    this.webhookAttempts.inc({ outcome });
  }

  /** A staff account was locked by failed sign-ins (the alert on repeated administrator locks reads it). */
  operatorLocked(role: string, kind: 'lapsing' | 'until_reset'): void {
    this.operatorLocks.inc({ role, kind });
  }

  dedupeCaseOpened(kind: 'duplicate' | 'possible_duplicate' | 'watchlist'): void {
    this.dedupeCasesOpened.inc({ kind });
  }

  dedupeCaseDecided(status: 'confirmed' | 'dismissed'): void {
    this.dedupeDecisions.inc({ status });
  }

  queueState(queue: string, state: { waiting: number; active: number; workers: number }): void {
    this.queueJobs.set({ queue, state: 'waiting' }, state.waiting);
    this.queueJobs.set({ queue, state: 'active' }, state.active);
    this.queueWorkers.set({ queue }, state.workers);
  }

  observeHttp(method: string, route: string, status: number, seconds: number): void {
    const labels = { method, route, status: String(status) };
    this.httpRequests.inc(labels);
    this.httpDuration.observe(labels, seconds);
  }

  outcome(endpoint: string, outcome: string): void {
    this.outcomes.inc({ endpoint, outcome });
  }

  stage(stage: 'liveness' | 'embed' | 'search', ms: number): void {
    this.stageDuration.observe({ stage }, ms / 1000);
  }

  setDependency(dependency: Dependency, up: boolean): void {
    this.dependencyUp.set({ dependency }, up ? 1 : 0);
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
