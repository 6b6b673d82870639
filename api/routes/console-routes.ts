/** The routes added for the browser consoles (issue 13), registered with one line in index.ts. */
import type { AppDeps } from '../deps.js';
import type { AnyRoute } from '../route-table.js';
import auditEventRoutes from './audit-events.js';
import operatorDirectoryRoutes from './operator-directory.js';
import operatorSearchRoutes from './operator-searches.js';

export default function consoleRoutes(deps: AppDeps): AnyRoute[] {
  return [...operatorDirectoryRoutes(deps), ...auditEventRoutes(deps), ...operatorSearchRoutes(deps)];
}
