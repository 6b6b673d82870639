/** The public entry of this wing: what other wings may use. */
export * from './authorization-service.js';
export * from './mfa-service.js';
export * from './operators-repository.js';
export * from './otp-service.js';
export * from './passwords.js';
export * from './token-service.js';
export * from './sealed-families.js';
