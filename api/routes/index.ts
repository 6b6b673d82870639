/** Every route module of the API, in one list: the router, OpenAPI and the authorisation tests read it. */
import type { AppDeps } from '../deps.js';
import type { AnyRoute } from '../route-table.js';
import { adminQueueRoutes } from './admin-queues.js';
import authRoutes from './auth.js';
import identityRoutes from './identity.js';
import registryRoutes from './registry.js';
import disputeRoutes from './disputes.js';
import operatorRoutes from './operators.js';
import reportRoutes from './reports.js';
import systemRoutes from './system.js';
import userRoutes from './users.js';
import verificationRoutes from './verification.js';
import consoleRoutes from './console-routes.js';

export function allRoutes(deps: AppDeps): AnyRoute[] {
  return [...systemRoutes(deps), ...adminQueueRoutes(deps), ...(deps.config.registrySimulator ? registryRoutes(deps) : []), ...identityRoutes(deps), ...userRoutes(deps), ...disputeRoutes(deps), ...reportRoutes(deps), ...authRoutes(deps), ...operatorRoutes(deps), ...verificationRoutes(deps), ...consoleRoutes(deps)];
}
