/** What a route module may receive: the services, and the few process-wide parts routes use themselves. */
import type { AppDeps, Services } from './deps.js';

export type RouteDeps = Services & Pick<AppDeps, 'config' | 'metrics' | 'health' | 'tokens' | 'authorizer'>;

declare module '../../platform/wing.js' {
  // The wings' route modules (their manifests' `routes`) receive exactly this.
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface WingRouteDeps extends RouteDeps {}
}
