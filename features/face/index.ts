/** The public entry of this wing: what other wings may use. */
export * from './biometric-attempts-service.js';
export * from './biometric-attempts-store.js';
export * from './canonical-refresh.js';
export * from './embeddings-repository.js';
export * from './face-service.js';
export * from './quality-schemas.js';
export * from './template-rotation.js';
