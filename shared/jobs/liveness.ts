/** Job contract of the `liveness` queue: decode, detect, choose the face, landmarks, anti-spoof score, capture quality. */
import type { FaceErrorCode } from '../face/face-error.js';
import type { FaceMode, LivenessResult } from '../face/liveness.js';
import { awaitedJobContract } from './contract.js';

export type { DetectedFace } from '../face/liveness.js';

export const LIVENESS_QUEUE = 'liveness' as const;

export interface LivenessJob {
  /** The upload, normalised once by the API (EXIF-rotated, bounded, JPEG), base64. */
  imageB64: string;
  mode: FaceMode;
}

/** The engine's liveness result, or the photo's face outcome (an engine fault fails the job instead). */
export type LivenessJobResult =
  | ({ ok: true } & LivenessResult)
  | { ok: false; code: FaceErrorCode; faceCount: number; ms: number };

export const livenessContract = awaitedJobContract<typeof LIVENESS_QUEUE, LivenessJob>(LIVENESS_QUEUE);
