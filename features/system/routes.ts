/** System endpoints: health, the deployed face engine version, metrics, the fixed attestation setting. */
import { createHash, timingSafeEqual } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import { AppError } from '../../platform/errors.js';
import { route, type AnyRoute } from '../../platform/http/route-table.js';
import type { Authorizer } from '../sign-in/index.js';
import type { HealthService } from './health-service.js';
import type { Config } from '../../platform/config.js';
import type { Metrics } from '../../platform/metrics.js';

const DependencyStatus = Type.Object({
  up: Type.Boolean(),
  latencyMs: Type.Optional(Type.Integer()),
  detail: Type.Optional(Type.Union([Type.String(), Type.Record(Type.String(), Type.Unknown())])),
});

const HealthBody = Type.Object({
  status: Type.Union([Type.Literal('ok'), Type.Literal('degraded')]),
  dependencies: Type.Object({
    db: DependencyStatus,
    cache: DependencyStatus,
    face_engine: DependencyStatus,
    identity_registry: DependencyStatus,
    vector_index: DependencyStatus,
  }),
  processes: Type.Optional(
    Type.Array(
      Type.Object({
        name: Type.String(),
        state: Type.String({ description: 'starting, running, restarting, stopping or stopped' }),
        pid: Type.Union([Type.Integer(), Type.Null()]),
        restarts: Type.Integer(),
        crashLoop: Type.Boolean({ description: 'CRASH_LOOP_RESTARTS restarts within CRASH_LOOP_WINDOW_MS' }),
        lastExit: Type.Union([
          Type.Null(),
          Type.Object({ code: Type.Union([Type.Integer(), Type.Null()]), signal: Type.Union([Type.String(), Type.Null()]), at: Type.String() }),
        ]),
      }),
      { description: 'Only under `npm start`: its supervised processes (a dead child is restarted with backoff)' },
    ),
  ),
});

const ModelsBody = Type.Object({
  face_engine: Type.Union([
    Type.Null(),
    Type.Object(
      {
        version: Type.String(),
        models: Type.Array(Type.Object({ name: Type.String(), role: Type.String(), sha256: Type.String() })),
      },
      { additionalProperties: true },
    ),
  ]),
  vectorIndex: Type.Object({ factory: Type.String(), metric: Type.Literal('inner_product') }),
});

/** Whether an Authorization header carries the scrape token (compared in constant time). */
function metricsBearerMatches(header: string, token: string): boolean {
  const m = /^Bearer (.+)$/i.exec(header.trim());
  if (!m) return false;
  const given = createHash('sha256').update(m[1]!).digest();
  return timingSafeEqual(given, createHash('sha256').update(token).digest());
}

export default function systemRoutes(deps: { config: Config; health: HealthService; metrics: Metrics; authorizer: Authorizer }): AnyRoute[] {
  const { config } = deps;
  /** A valid administrator bearer (anything else, including a bad token, gets the anonymous view). */
  const isAdministrator = async (authorization: string) => {
    if (!authorization) return false;
    try {
      await deps.authorizer.current(await deps.authorizer.verify(authorization, 'administrator', {}), 'administrator');
      return true;
    } catch {
      return false;
    }
  };
  return [
    route({
      method: 'GET',
      path: '/health',
      operationId: 'getHealth',
      tag: 'System',
      summary: 'Dependency health',
      description:
        '503 `degraded` only when the database or the cache is down; face_engine, identity_registry and vector_index are reported but do not decide. ' +
        "Anonymous callers get `status` and each dependency's `up` only, from the background poller's last result (at most 15 s old; one shared check when there is none). " +
        'An administrator bearer token gets a fresh check with `latencyMs`, `detail` and the supervised `processes`.',
      auth: 'none',
      responses: {
        200: { description: 'All of db and cache are up', schema: HealthBody },
        503: { description: 'Degraded: db or cache down', schema: HealthBody },
      },
      handler: async function getHealth({ ctx }) {
        const report = (await isAdministrator(ctx.get('authorization'))) ? await deps.health.check() : await deps.health.summary();
        return { status: report.status === 'ok' ? 200 : 503, body: report };
      },
    }),
    route({
      method: 'GET',
      path: '/health/ready',
      operationId: 'getReadiness',
      tag: 'System',
      summary: "The balancer's check: whether this process's own links answer now",
      description:
        '200 when this process reaches PostgreSQL and Redis now (asked at most twice a second); 503 otherwise. ' +
        'For the balancer in front of several web processes: a process back from a cut link stays out of service until its connections answer.',
      auth: 'none',
      hidden: true,
      responses: { 200: { description: 'Ready', schema: Type.Object({ status: Type.Literal('ready') }) } },
      handler: async function getReadiness() {
        const failing = await deps.health.ready();
        if (failing) throw new AppError('dependency_unavailable', 'This process cannot reach what it needs now', { retryAfter: 2 });
        return { body: { status: 'ready' as const } };
      },
    }),
    route({
      method: 'GET',
      path: '/models',
      operationId: 'getModels',
      tag: 'System',
      summary: 'Deployed face engine version, read live from the face worker',
      description: 'Versions and model digests only: the decision thresholds are not published (they would tell someone trying faces how close to aim).',
      auth: 'none',
      responses: { 200: { description: 'face_engine is null when the engine is unreachable', schema: ModelsBody } },
      handler: async function getModels() {
        let faceEngine: unknown = null;
        try {
          const res = await fetch(`${config.face.engineUrl}/version`, { signal: AbortSignal.timeout(1500) });
          if (res.ok) faceEngine = await res.json();
        } catch {
          faceEngine = null;
        }
        return {
          body: {
            face_engine: faceEngine,
            vectorIndex: { factory: config.search.indexFactory, metric: 'inner_product' },
          },
        };
      },
    }),
    route({
      method: 'GET',
      path: '/metrics',
      operationId: 'getMetrics',
      tag: 'System',
      summary: 'Prometheus text exposition',
      description:
        'With METRICS_TOKEN set (required in production), only `Authorization: Bearer <METRICS_TOKEN>` reads it; anything else is 401 `unauthorized`. The token is not a user or staff bearer: a scraper holds nothing else.',
      auth: 'none',
      responses: { 200: { description: 'Metrics', contentType: 'text/plain' } },
      errors: ['unauthorized'],
      handler: async function getMetrics({ ctx }) {
        if (config.http.metricsToken && !metricsBearerMatches(ctx.get('authorization'), String(config.http.metricsToken))) {
          throw new AppError('unauthorized', 'GET /metrics needs the scrape token: Authorization: Bearer <METRICS_TOKEN>');
        }
        const { contentType, body } = await deps.metrics.render();
        return { headers: { 'Content-Type': contentType }, body };
      },
    }),
    route({
      method: 'GET',
      path: '/settings/attestation-required',
      operationId: 'getAttestationRequired',
      tag: 'System',
      summary: 'The fixed attestation setting of /identify',
      auth: 'administrator',
      responses: { 200: { description: 'Always true', schema: Type.Object({ attestationRequired: Type.Literal(true) }) } },
      handler: async function getAttestationRequired() {
        return { body: { attestationRequired: true } };
      },
    }),
    route({
      method: 'PATCH',
      path: '/settings/attestation-required',
      operationId: 'patchAttestationRequired',
      tag: 'System',
      summary: 'Always 403: no path changes this value',
      auth: 'none',
      // Whatever is sent, by whoever: the answer is the same 403.
      query: Type.Object({}, { additionalProperties: true }),
      responses: {},
      errors: ['setting_immutable'],
      handler: async function patchAttestationRequired() {
        throw new AppError('setting_immutable', 'The attestation setting cannot be changed');
      },
    }),
  ];
}
