/**
 * Every route of the API: each wing's manifest (features/<wing>/manifest.ts, `routes`) loads its own
 * route module, in the order of processes/wings.ts. The router, OpenAPI and the authorisation tests read
 * this list.
 */
import type { AppDeps } from './deps.js';
import type { AnyRoute } from '../../platform/http/route-table.js';
import type { RouteDeps } from './route-deps.js';
import { WINGS } from '../wings.js';

export async function allRoutes(deps: AppDeps): Promise<AnyRoute[]> {
  const r: RouteDeps = { ...deps.services, config: deps.config, metrics: deps.metrics, health: deps.health, tokens: deps.tokens, authorizer: deps.authorizer };
  const modules = await Promise.all(WINGS.map((wing) => wing.routes?.()));
  return modules.flatMap((routesOf) => routesOf?.(r) ?? []);
}
