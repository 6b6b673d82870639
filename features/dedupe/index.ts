/** The public entry of this wing: what other wings may use. */
export * from './service.js';
export * from './sealed-families.js';
