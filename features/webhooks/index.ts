/** The public entry of this wing: what other wings may use. */
export * from './repository.js';
export * from './sealed-families.js';
