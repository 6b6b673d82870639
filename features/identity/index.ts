/** The public entry of this wing: what other wings may use. */
export * from './identity-tokens.js';
