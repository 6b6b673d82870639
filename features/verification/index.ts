/** The public entry of this wing: what other wings may use. */
export * from './history-service.js';
export * from './proof-tokens.js';
export * from './search-log-schemas.js';
export * from './search-logs-repository.js';
