/** Every route module of the API, in one list: the router, OpenAPI and the authorisation tests read it. */
import type { AppDeps } from '../deps.js';
import type { AnyRoute } from '../route-table.js';
import { adminQueueRoutes } from './admin-queues.js';
import auditEventRoutes from './audit-events.js';
import authRoutes from './auth.js';
import identityRoutes from './identity.js';
import registryRoutes from './registry.js';
import disputeRoutes from './disputes.js';
import dedupeRoutes from './dedupe.js';
import operatorRoutes from './operators.js';
import reportRoutes from './reports.js';
import systemRoutes from './system.js';
import userRoutes from './users.js';
import verificationRoutes from './verification.js';
import type { RouteDeps } from './route-deps.js';
import webhookRoutes from './webhooks.js';

export function allRoutes(deps: AppDeps): AnyRoute[] {
  const r: RouteDeps = { ...deps.services, config: deps.config, metrics: deps.metrics, health: deps.health, tokens: deps.tokens, authorizer: deps.authorizer };
  return [
    ...systemRoutes(r),
    ...adminQueueRoutes(r),
    ...(deps.config.registry.simulator ? registryRoutes(r) : []),
    ...identityRoutes(r),
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
