/**
 * Prometheus metrics (prom-client): default process metrics, HTTP requests and durations by route
 * template and status, business outcomes, and `service_dependency_up{dependency}` kept fresh by the
 * background poller in features/system/health-service.ts.
 */
import client from 'prom-client';

export const DEPENDENCIES = ['db', 'cache', 'face_engine', 'identity_registry', 'vector_index'] as const;
export type Dependency = (typeof DEPENDENCIES)[number];

/**
 * A counter a wing declares in its own folder (its manifest's `metrics`): the floor creates it on a
 * process's registry, once, with every label set in `zero` at 0 so that the series exist before the
 * first event (an alert on a rate then sees 0, not nothing).
 */
export interface CounterSpec<L extends string = string> {
  name: string;
  help: string;
  labelNames: readonly L[];
  zero?: ReadonlyArray<Record<L, string>>;
}

/** Declares a wing's counter (a typed identity: the label names type its `inc`). */
export function counterSpec<const L extends string>(spec: CounterSpec<L>): CounterSpec<L> {
  return spec;
}

/** A gauge a wing declares in its own folder (its manifest's `metrics`), created on a process's registry once. */
export interface GaugeSpec<L extends string = string> {
  gauge: true;
  name: string;
  help: string;
  labelNames: readonly L[];
}

/** Declares a wing's gauge (the label names type its `set`). */
export function gaugeSpec<const L extends string>(spec: Omit<GaugeSpec<L>, 'gauge'>): GaugeSpec<L> {
  return { ...spec, gauge: true };
}

/** What a manifest's `metrics` lists. */
export type MetricSpec = CounterSpec | GaugeSpec;

export class Metrics {
  readonly registry = new client.Registry();
  private readonly declared = new Map<string, { spec: CounterSpec; counter: client.Counter<string> }>();
  private readonly declaredGauges = new Map<string, { spec: GaugeSpec; gauge: client.Gauge<string> }>();
  private readonly httpRequests: client.Counter<'method' | 'route' | 'status'>;
  private readonly httpDuration: client.Histogram<'method' | 'route' | 'status'>;
  private readonly outcomes: client.Counter<'endpoint' | 'outcome'>;
  private readonly dependencyUp: client.Gauge<'dependency'>;
  private readonly stageDuration: client.Histogram<'stage'>;
  private readonly queueJobs: client.Gauge<'queue' | 'state'>;
  private readonly queueWorkers: client.Gauge<'queue'>;

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
    this.queueWorkers = new client.Gauge({
      name: 'face_queue_workers',
      help: 'Workers connected to each face/search queue, as last sampled by the fail-fast admission check',
      labelNames: ['queue'],
      registers: [this.registry],
    });
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

  /** The counter of `spec` on this registry, created (with its zero series) the first time it is asked. */
  counter<L extends string>(spec: CounterSpec<L>): client.Counter<L> {
    const had = this.declared.get(spec.name);
    if (had) {
      if (had.spec !== spec) throw new Error(`Metric ${spec.name} is declared twice`);
      return had.counter as client.Counter<L>;
    }
    const counter = new client.Counter<L>({ name: spec.name, help: spec.help, labelNames: spec.labelNames, registers: [this.registry] });
    for (const labels of spec.zero ?? []) counter.inc(labels as Partial<Record<L, string>>, 0);
    this.declared.set(spec.name, { spec, counter: counter as client.Counter<string> });
    return counter;
  }

  /** The gauge of `spec` on this registry, created the first time it is asked. */
  gauge<L extends string>(spec: GaugeSpec<L>): client.Gauge<L> {
    const had = this.declaredGauges.get(spec.name);
    if (had) {
      if (had.spec !== spec) throw new Error(`Metric ${spec.name} is declared twice`);
      return had.gauge as client.Gauge<L>;
    }
    const gauge = new client.Gauge<L>({ name: spec.name, help: spec.help, labelNames: spec.labelNames, registers: [this.registry] });
    this.declaredGauges.set(spec.name, { spec, gauge: gauge as client.Gauge<string> });
    return gauge;
  }

  /** Creates a manifest's metric (a counter with its zero series, or a gauge). */
  declare(spec: MetricSpec): void {
    if ('gauge' in spec) this.gauge(spec);
    else this.counter(spec);
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
