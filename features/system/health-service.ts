/**
 * Dependency checks for GET /health and the `service_dependency_up` gauge. Only the database and
 * the cache decide the overall status; the face engine, the identity registry and the vector index
 * are reported but do not make the service degraded. The gauge is refreshed by its own poller,
 * independently of calls to /health.
 */
import { readFileSync } from 'node:fs';
import type { UnitOfWork } from '../../platform/database/unit-of-work.js';
import type { Redis } from 'ioredis';
import type { Config } from '../../platform/config.js';
import { DEPENDENCIES, type Dependency, type Metrics } from '../../platform/metrics.js';
import { shardReplicas } from '../../platform/jobs/search-shards.js';

export interface DependencyStatus {
  up: boolean;
  latencyMs?: number;
  detail?: string | Record<string, unknown>;
}

/** One process under `npm start`'s supervisor (platform/processes/supervisor.ts). */
export interface SupervisedProcess {
  name: string;
  state: string;
  pid: number | null;
  restarts: number;
  crashLoop: boolean;
  lastExit: { code: number | null; signal: string | null; at: string } | null;
}

export interface HealthReport {
  status: 'ok' | 'degraded';
  dependencies: Record<Dependency, DependencyStatus>;
  /** Only under `npm start`: its processes, restarts and crash loops. */
  processes?: SupervisedProcess[];
}

/** The supervisor's status file, when this process runs under `npm start` and the supervisor is alive. */
export function supervisedProcesses(file: string): SupervisedProcess[] | undefined {
  if (!file) return undefined;
  try {
    const status = JSON.parse(readFileSync(file, 'utf8')) as { supervisorPid: number; processes: SupervisedProcess[] };
    process.kill(status.supervisorPid, 0); // throws when that supervisor is gone (a stale file)
    return status.processes.map(({ name, state, pid, restarts, crashLoop, lastExit }) => ({ name, state, pid, restarts, crashLoop, lastExit }));
  } catch {
    return undefined;
  }
}

const CHECK_TIMEOUT_MS = 1500;
/** The readiness check's bound on each of this process's links, and how long one answer is reused. */
const READY_TIMEOUT_MS = 800;
const READY_REUSE_MS = 500;

function timeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
    }),
  ]);
}

async function timed(fn: () => Promise<string | Record<string, unknown> | undefined>): Promise<DependencyStatus> {
  const started = performance.now();
  try {
    const detail = await fn();
    return { up: true, latencyMs: Math.round(performance.now() - started), ...(detail !== undefined ? { detail } : {}) };
  } catch (e) {
    return { up: false, latencyMs: Math.round(performance.now() - started), detail: e instanceof Error ? e.message : String(e) };
  }
}

async function getJson(url: string, ms: number): Promise<Record<string, unknown>> {
  const res = await fetch(url, { signal: AbortSignal.timeout(ms) });
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  return (await res.json()) as Record<string, unknown>;
}

/** What an anonymous caller sees: the status and each dependency's `up`, nothing else. */
export interface HealthSummary {
  status: 'ok' | 'degraded';
  dependencies: Record<Dependency, { up: boolean }>;
}

/** How old the last check may be when an anonymous /health is answered from it (SPEC 12.3). */
export const HEALTH_SUMMARY_MAX_AGE_MS = 15_000;

export class HealthService {
  private timer: NodeJS.Timeout | undefined;
  /** The last check (the poller's, or one made on demand) and when it finished. */
  private last: { report: HealthReport; at: number } | undefined;
  /** A check in progress for anonymous callers: one at a time, whatever their number. */
  private inFlight: Promise<HealthReport> | undefined;

  /** The last readiness answer and when it was asked (shared for READY_REUSE_MS). */
  private readiness: { at: number; answer: Promise<string | null> } | undefined;

  /**
   * `links`: this process's other links that must answer for it to serve (the web process: its job
   * queue connection and reply reader); throws what failed.
   */
  constructor(
    private readonly deps: {
      config: Config;
      database: Pick<UnitOfWork, 'ping'>;
      redis: Redis;
      metrics: Metrics;
      links?: (timeoutMs: number) => Promise<void>;
    },
  ) {}

  /**
   * Whether THIS process can serve now (GET /health/ready, the balancer's check): its own connections
   * to PostgreSQL and Redis answer within READY_TIMEOUT_MS, asked now. null when they do, else what
   * failed. Unlike /health it says nothing about the parts themselves: a process whose host was cut
   * off and has just come back answers /health 503 like every process while Redis is away, but only
   * it has connections still silent after the heal. One answer serves every caller for READY_REUSE_MS.
   */
  ready(): Promise<string | null> {
    if (this.readiness && Date.now() - this.readiness.at < READY_REUSE_MS) return this.readiness.answer;
    const { database, redis, links } = this.deps;
    const answer = Promise.all([
      timeout(database.ping(), READY_TIMEOUT_MS, 'PostgreSQL'),
      timeout(redis.ping(), READY_TIMEOUT_MS, 'Redis'),
      links?.(READY_TIMEOUT_MS),
    ]).then(
      () => null,
      (e: unknown) => (e instanceof Error ? e.message : String(e)),
    );
    this.readiness = { at: Date.now(), answer };
    return answer;
  }

  async check(): Promise<HealthReport> {
    const { config, database, redis } = this.deps;
    const [dbStatus, cache, faceEngine, registry, vectorIndex] = await Promise.all([
      timed(async () => {
        await timeout(database.ping(), CHECK_TIMEOUT_MS, 'PostgreSQL');
        return undefined;
      }),
      timed(async () => {
        const pong = await timeout(redis.ping(), CHECK_TIMEOUT_MS, 'Redis');
        if (pong !== 'PONG') throw new Error('unexpected PING answer');
        return undefined;
      }),
      timed(async () => {
        const body = await getJson(`${config.face.engineUrl}/health`, CHECK_TIMEOUT_MS);
        if (body.status !== 'ok') throw new Error(String(body.detail ?? 'face engine not ready'));
        return { engineVersion: body.engineVersion ?? null };
      }),
      timed(async () => {
        // Reachable = answers below 500. `/stats` is the simulator's; a real registry may answer it 404.
        const res = await fetch(`${config.registry.url}/stats`, { signal: AbortSignal.timeout(CHECK_TIMEOUT_MS) });
        await res.body?.cancel();
        if (res.status >= 500) throw new Error(`the registry answered ${res.status}`);
        return undefined;
      }),
      timed(async () => {
        const body = await getJson(`${config.search.healthUrl}/health`, CHECK_TIMEOUT_MS);
        if (body.status !== 'ok') throw new Error(String(body.detail ?? 'vector index not ready'));
        // With shards, the index answers only when every shard has a replica reading its group.
        const shards =
          config.search.shards > 1 ? await timeout(shardReplicas(redis, config.redis.prefix, config.search.shards), CHECK_TIMEOUT_MS, 'Redis') : null;
        const away = shards?.filter((x) => x.replicas === 0).map((x) => x.shard) ?? [];
        if (away.length) throw new Error(`search shard(s) ${away.join(', ')} without a replica`);
        return { size: body.size ?? null, appliedSeq: body.appliedSeq ?? null, factory: body.factory ?? null, ...(shards ? { shards } : {}) };
      }),
    ]);
    const dependencies = { db: dbStatus, cache, face_engine: faceEngine, identity_registry: registry, vector_index: vectorIndex };
    for (const d of DEPENDENCIES) this.deps.metrics.setDependency(d, dependencies[d].up);
    const processes = supervisedProcesses(config.supervisor.statusFile);
    const report: HealthReport = { status: dbStatus.up && cache.up ? 'ok' : 'degraded', dependencies, ...(processes ? { processes } : {}) };
    this.last = { report, at: Date.now() };
    return report;
  }

  /**
   * The anonymous view, from the last check when it is at most HEALTH_SUMMARY_MAX_AGE_MS old (the
   * poller keeps it fresh), else from one shared check: a stranger polling /health in a loop never
   * makes this process call its dependencies, workers and the registry per request, and learns no
   * counts, process ids or error text.
   */
  async summary(): Promise<HealthSummary> {
    let report = this.last && Date.now() - this.last.at <= HEALTH_SUMMARY_MAX_AGE_MS ? this.last.report : undefined;
    if (!report) {
      this.inFlight ??= this.check().finally(() => {
        this.inFlight = undefined;
      });
      report = await this.inFlight;
    }
    const dependencies = Object.fromEntries(DEPENDENCIES.map((d) => [d, { up: report.dependencies[d].up }])) as HealthSummary['dependencies'];
    return { status: report.status, dependencies };
  }

  /** Starts the background poller of the dependency gauge. */
  startPoller(intervalMs: number): void {
    this.stopPoller();
    const tick = () => {
      this.check().catch(() => {});
    };
    tick();
    this.timer = setInterval(tick, intervalMs);
    this.timer.unref();
  }

  stopPoller(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
