/**
 * Job contract of the `embed` queue: the 512-d embedding of the face the `liveness` stage aligned to
 * the ArcFace template (it holds the decoded pixels; the embed job no longer carries the image).
 */
import type { SealedEmbedding } from '../face-path/sealing.js';
import { awaitedJobContract } from './contract.js';
import type { SearchFollowOn } from './search.js';

export const EMBED_QUEUE = 'embed' as const;

export interface EmbedJob {
  /** Ref of the chosen face the `liveness` job aligned and left sealed in Redis (platform/face-path/handoff.ts, kind `aligned`). */
  alignedFaceRef: string;
  /** The liveness job's resultSalt, with which the key ring opens the aligned face. A face already taken or expired fails the job (503). */
  alignedFaceSalt: string;
  /** Salt of the key that seals the result's embedding (platform/face-path/sealing.ts); lives only in this job. */
  resultSalt: string;
  /** The search to add with the embedding as soon as it is computed (platform/jobs/search.ts `SearchFollowOn`). */
  searchNext?: SearchFollowOn;
}

/**
 * The embed stage of a capture, run in place by the face process that takes its liveness job
 * (LivenessJob `embedNext`) as soon as it has aligned the chosen face, before its anti-spoof model:
 * no embed job; its result (an EmbedResult) comes with the liveness job's reply, under `jobId`
 * (platform/face-path/README.md, "Stages run in place"). `searchNext` is added as a job by that process.
 */
export interface EmbedFollowOn {
  /** The embed stage's id, chosen and awaited by the API (no job carries it). */
  jobId: string;
  /** Salt of the key that seals the embedding of the embed job. */
  resultSalt: string;
  searchNext?: SearchFollowOn;
}

/**
 * `ok: false` only for an image the engine cannot decode (the API normalises uploads first, so this
 * is a safety net); engine faults fail the job instead (the API answers 503).
 */
export type EmbedResult =
  | {
      ok: true;
      /** 512 floats, L2-normalised, sealed under the job's resultSalt and the key ring (never in clear in Redis). */
      sealedEmbedding: SealedEmbedding;
      engineVersion: string;
      ms: number;
    }
  | { ok: false; code: 'invalid_image'; ms: number };

export const embedContract = awaitedJobContract<typeof EMBED_QUEUE, EmbedJob>(EMBED_QUEUE);
