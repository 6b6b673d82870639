/** The public entry of this wing: what other wings may use. */
export * from './decision.js';
export * from './service.js';
export * from './session-store.js';
