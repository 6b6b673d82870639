/**
 * Job contract of the `liveness` queue: decode, detect, choose the face, landmarks, anti-spoof score,
 * capture quality, and the chosen face aligned for the `embed` stage (from the pixels decoded here: one
 * decode per request). The image and the aligned face travel as sealed Redis values, not in the job
 * (platform/face-path/handoff.ts).
 */
import type { FaceErrorCode } from '../face/face-error.js';
import type { QualitySummary } from '../face/quality.js';
import type { FaceMode, LivenessResult } from '../face/liveness.js';
import { awaitedJobContract } from './contract.js';
import type { EmbedFollowOn } from './embed.js';

export type { DetectedFace } from '../face/liveness.js';

export const LIVENESS_QUEUE = 'liveness' as const;

export interface LivenessJob {
  /**
   * Ref of the upload, normalised once by the API (EXIF-rotated, bounded, JPEG), sealed under
   * `resultSalt` and kept in Redis until the deadline (platform/face-path/handoff.ts, kind `image`).
   */
  imageRef: string;
  mode: FaceMode;
  /**
   * Salt of the key that seals the image and the aligned face it hands on (with the key ring:
   * platform/face-path/sealing.ts); lives only in the jobs. Not a key: alone it opens nothing.
   */
  resultSalt: string;
  /**
   * The aligned face is handed on only when the liveness score reaches this (the API embeds nothing
   * else): a capture that fails liveness leaves no face in Redis. 0 for a registry photo.
   */
  handOffMinLiveness: number;
  /**
   * When given, the worker embeds the chosen face itself once it is aligned, before the anti-spoof
   * score is known (`handOffMinLiveness` does not apply), adds the search it names, and answers the
   * embed stage under `jobId` with this job's reply: no embed job (platform/face-path/README.md,
   * "Stages run in place"). The API discards the embedding (and any search) of a capture that then
   * fails liveness; no aligned face is left in Redis.
   */
  embedNext?: EmbedFollowOn;
}

/** The engine's liveness result, or the photo's face outcome (an engine fault fails the job instead). */
export type LivenessJobResult =
  | ({
      ok: true;
      /**
       * Ref of the chosen face aligned to the ArcFace 112x112 template (features/face/worker/pipeline/embed.ts
       * `encodeAlignedFace`), sealed under this job's resultSalt and kept in Redis until the request's
       * deadline (platform/face-path/handoff.ts, kind `aligned`). The API passes the ref and the salt to the embed job.
       * null when the liveness score is below the job's `handOffMinLiveness`, and when the job named an
       * `embedNext` (the face was embedded in place).
       */
      alignedFaceRef: string | null;
    } & LivenessResult)
  /** `quality`: on `no_face`, whether the whole photo is too dark, too bright or too blurred. */
  | { ok: false; code: FaceErrorCode; faceCount: number; quality?: QualitySummary; ms: number };

export const livenessContract = awaitedJobContract<typeof LIVENESS_QUEUE, LivenessJob>(LIVENESS_QUEUE);
