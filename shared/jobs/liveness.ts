/**
 * Job contract of the `liveness` queue: decode, detect, choose the face, landmarks, anti-spoof score,
 * capture quality, and the chosen face aligned for the `embed` stage (from the pixels decoded here: one decode per
 * request, and the image crosses Redis once).
 */
import type { FaceErrorCode } from '../face/face-error.js';
import type { FaceMode, LivenessResult } from '../face/liveness.js';
import type { SealedEmbedding } from '../sealed-embedding.js';
import { awaitedJobContract } from './contract.js';

export type { DetectedFace } from '../face/liveness.js';

export const LIVENESS_QUEUE = 'liveness' as const;

export interface LivenessJob {
  /** The upload, normalised once by the API (EXIF-rotated, bounded, JPEG), base64. */
  imageB64: string;
  mode: FaceMode;
  /** Key that seals the result's aligned face (shared/sealed-embedding.ts); lives only in this job. */
  resultKey: string;
}

/** The engine's liveness result, or the photo's face outcome (an engine fault fails the job instead). */
export type LivenessJobResult =
  | ({
      ok: true;
      /**
       * The chosen face aligned to the ArcFace 112x112 template (workers/face/pipeline/embed.ts
       * `encodeAlignedFace`), sealed with this job's resultKey: results are copied into the queue's
       * events stream, so a face never sits there in clear. The API hands it, still sealed, with the
       * key to the embed job (whose hash is deleted when it completes).
       */
      alignedFace: SealedEmbedding;
    } & LivenessResult)
  | { ok: false; code: FaceErrorCode; faceCount: number; ms: number };

/**
 * Each result carries the sealed aligned face (100 KB of base64), and BullMQ copies results into the
 * events stream: 1,000 events (about 250 results, 25 MB) instead of BullMQ's 10,000 (250 MB).
 */
export const livenessContract = awaitedJobContract<typeof LIVENESS_QUEUE, LivenessJob>(LIVENESS_QUEUE, { eventsMaxLen: 1000 });
