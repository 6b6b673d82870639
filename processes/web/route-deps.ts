/** What a route module may receive: the services, and the few process-wide parts routes use themselves. */
import type { AppDeps, Services } from './deps.js';

export type RouteDeps = Services & Pick<AppDeps, 'config' | 'metrics' | 'health' | 'tokens' | 'authorizer'>;
