/** The routes the browser consoles read, registered with one line in index.ts. */
import type { AnyRoute } from '../route-table.js';
import auditEventRoutes from './audit-events.js';
import operatorDirectoryRoutes from './operator-directory.js';
import operatorSearchRoutes from './operator-searches.js';
import type { RouteDeps } from './index.js';

export default function consoleRoutes(deps: RouteDeps): AnyRoute[] {
  return [...operatorDirectoryRoutes(deps), ...auditEventRoutes(deps), ...operatorSearchRoutes(deps)];
}
