/**
 * Errors as values with a stable code: services throw AppError, the API renders it in one place
 * (platform/http/middleware/errors.ts) as `{ error, message, details? }`.
 */
export const ERROR_STATUS = {
  validation_failed: 400,
  attestation_required: 400,
  invalid_image: 400,
  registry_mismatch: 400,
  otp_invalid: 400,
  bad_request: 400,
  weak_password: 400,
  phone_not_supported: 400,
  request_timeout: 408,
  unauthorized: 401,
  invalid_credentials: 401,
  invalid_refresh_token: 401,
  mfa_required: 401,
  forbidden: 403,
  password_reset_required: 403,
  account_locked: 403,
  operator_deactivated: 403,
  proof_token_invalid: 403,
  setting_immutable: 403,
  mfa_setup_required: 403,
  temporary_password_expired: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  expectation_failed: 417,
  liveness_failed: 422,
  liveness_session_required: 422,
  face_mismatch: 422,
  cross_registry_mismatch: 422,
  duplicate_identity: 422,
  no_face: 422,
  multiple_faces: 422,
  otp_cooldown: 429,
  otp_too_many_attempts: 429,
  rate_limited: 429,
  biometric_locked: 429,
  headers_too_large: 431,
  internal_error: 500,
  registry_unavailable: 502,
  face_engine_unavailable: 503,
  dependency_unavailable: 503,
  degraded: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface AppErrorOptions {
  details?: Record<string, unknown>;
  /** Extra top-level body fields (e.g. `outcome` on face outcomes). */
  extra?: Record<string, unknown>;
  /** Seconds for a Retry-After header (429). */
  retryAfter?: number;
  cause?: unknown;
}

export class AppError extends Error {
  readonly status: number;
  readonly details?: Record<string, unknown>;
  readonly extra?: Record<string, unknown>;
  readonly retryAfter?: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    opts: AppErrorOptions = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'AppError';
    this.status = ERROR_STATUS[code];
    this.details = opts.details;
    this.extra = opts.extra;
    this.retryAfter = opts.retryAfter;
  }
}

export const notFound = (what = 'Resource') => new AppError('not_found', `${what} not found`);
export const forbidden = (message = 'You may not do this') => new AppError('forbidden', message);
