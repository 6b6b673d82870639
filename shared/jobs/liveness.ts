/** Job contract of the `liveness` queue: decode, detect, choose the face, landmarks, anti-spoof score, capture quality. */
import type { QualityAssessment } from '../face-quality.js';

export const LIVENESS_QUEUE = 'liveness' as const;

export interface LivenessJob {
  /** The upload, normalised once by the API (EXIF-rotated, bounded, JPEG), base64. */
  imageB64: string;
  /** `single`: 1:1 flows refuse several clear faces; `largest`: /identify takes the largest face. */
  mode: 'single' | 'largest';
}

export interface DetectedFace {
  box: [number, number, number, number];
  detScore: number;
  landmarks5: [number, number][];
}

export type LivenessResult =
  | {
      ok: true;
      face: DetectedFace;
      faceCount: number;
      livenessScore: number;
      /** Advisory capture quality of the chosen face (shared/face-quality.ts); absent from older workers. */
      quality?: QualityAssessment;
      ms: number;
    }
  | { ok: false; code: 'invalid_image' | 'no_face' | 'multiple_faces'; faceCount: number; ms: number };
