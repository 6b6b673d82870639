/** Every route module of the API, in one list: the router, OpenAPI and the authorisation tests read it. */
import type { AppDeps } from '../deps.js';
import type { AnyRoute } from '../route-table.js';
import { adminQueueRoutes } from './admin-queues.js';
import systemRoutes from './system.js';

export function allRoutes(deps: AppDeps): AnyRoute[] {
  return [...systemRoutes(deps), ...adminQueueRoutes(deps)];
}
