/** Every route module of the API, in one list: the router, OpenAPI and the authorisation tests read it. */
import type { AppDeps } from './deps.js';
import type { AnyRoute } from '../../platform/http/route-table.js';
import { adminQueueRoutes } from '../../features/system/admin-queues-routes.js';
import auditEventRoutes from '../../features/audit/routes.js';
import authRoutes from '../../features/sign-in/routes.js';
import identityRoutes from '../../features/identity/routes.js';
import livenessRoutes from '../../features/liveness/routes.js';
import registryRoutes from '../../features/registry-simulator/routes.js';
import disputeRoutes from '../../features/disputes/routes.js';
import dedupeRoutes from '../../features/dedupe/routes.js';
import operatorRoutes from '../../features/staff/routes.js';
import reportRoutes from '../../features/reports/routes.js';
import systemRoutes from '../../features/system/routes.js';
import userRoutes from '../../features/accounts/routes.js';
import verificationRoutes from '../../features/verification/routes.js';
import type { RouteDeps } from './route-deps.js';
import webhookRoutes from '../../features/webhooks/routes.js';

export function allRoutes(deps: AppDeps): AnyRoute[] {
  const r: RouteDeps = { ...deps.services, config: deps.config, metrics: deps.metrics, health: deps.health, tokens: deps.tokens, authorizer: deps.authorizer };
  return [
    ...systemRoutes(r),
    ...adminQueueRoutes(r),
    ...(deps.config.registry.simulator ? registryRoutes(r) : []),
    ...identityRoutes(r),
    ...livenessRoutes(r),
    ...userRoutes(r),
    ...disputeRoutes(r),
    ...dedupeRoutes(r),
    ...reportRoutes(r),
    ...authRoutes(r),
    ...operatorRoutes(r),
    ...verificationRoutes(r),
    ...auditEventRoutes(r),
    ...webhookRoutes(r),
  ];
}
