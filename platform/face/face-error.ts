/**
 * Face outcomes that are a property of the submitted photo, not a fault of the service.
 *
 * - `invalid_image`: not a decodable JPEG, PNG or WebP, or over the pixel limit (SPEC 3, HTTP 400).
 * - `no_face`: no face found (SPEC 3, HTTP 422 / outcome).
 * - `multiple_faces`: several faces clearly present where exactly one is required (1:1 flows).
 *
 * Anything else thrown by the pipeline (a missing model file, an ONNX runtime failure, a programming
 * error) is a plain Error and must be treated as an engine fault, never as a face outcome.
 */
import type { QualitySummary } from './quality.js';

export type FaceErrorCode = 'invalid_image' | 'no_face' | 'multiple_faces';

export class FaceError extends Error {
  readonly code: FaceErrorCode;
  /** Faces detected, for `no_face` (0) and `multiple_faces`; undefined for `invalid_image`. */
  readonly faceCount?: number;
  /** For `no_face`: whether the whole photo is too dark, too bright or too blurred (advice, as on a face). */
  readonly quality?: QualitySummary;

  constructor(code: FaceErrorCode, message?: string, options?: { cause?: unknown; faceCount?: number; quality?: QualitySummary }) {
    super(message ?? defaultMessage(code), options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'FaceError';
    this.code = code;
    if (options?.faceCount !== undefined) this.faceCount = options.faceCount;
    if (options?.quality !== undefined) this.quality = options.quality;
  }
}

export function isFaceError(err: unknown): err is FaceError {
  return err instanceof FaceError;
}

function defaultMessage(code: FaceErrorCode): string {
  switch (code) {
    case 'invalid_image':
      return 'The upload is not a decodable JPEG, PNG or WebP image, or it exceeds the pixel limit';
    case 'no_face':
      return 'No face was found in the image';
    case 'multiple_faces':
      return 'More than one face is clearly present in the image';
  }
}
