/**
 * The configuration of this deployment: the floor's settings (platform/config.ts) with every wing's
 * (processes/wings.ts). Entry points, scripts, benches and tests import the loader from here, never
 * from the floor directly, so that no configuration is read without the wings' groups.
 */
import './wings.js';

export * from '../platform/config.js';
