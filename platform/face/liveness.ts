/**
 * What the liveness stage finds in a photo, as the engine returns it and the `liveness` job carries it
 * (platform/jobs/liveness.ts): one definition for the face worker, the API and the tools.
 */
import type { QualityAssessment } from './quality.js';

/** `single`: 1:1 flows refuse several clear faces; `largest`: /identify takes the largest face. */
export type FaceMode = 'single' | 'largest';

export interface DetectedFace {
  /** [x, y, width, height] of the detector box in pixels of the normalised image, clipped to it. */
  box: [number, number, number, number];
  /** Detector probability of the chosen face. */
  detScore: number;
  /** Left eye, right eye, nose tip, left and right mouth corner (image left/right), [x, y] pixels. */
  landmarks5: [number, number][];
}

export interface LivenessResult {
  face: DetectedFace;
  /** Probability (0..1) that the face is a live capture; compare with LIVENESS_THRESHOLD. */
  livenessScore: number;
  /** Faces detected in the image (including small or uncertain ones that did not block). */
  faceCount: number;
  /** Advisory capture quality of the chosen face (features/face/worker/pipeline/quality.ts); absent when not assessed. */
  quality?: QualityAssessment;
  /** Wall-clock milliseconds of the quality assessment alone (included in `ms`), for the benchmark. */
  qualityMs?: number;
  ms: number;
}
