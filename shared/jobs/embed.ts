/** Job contract of the `embed` queue: 5-point alignment to the ArcFace template and the 512-d embedding. */
import type { SealedEmbedding } from '../sealed-embedding.js';
import { awaitedJobContract } from './contract.js';

export const EMBED_QUEUE = 'embed' as const;

export interface EmbedJob {
  /** The normalised JPEG (the one the `liveness` job analysed), base64. */
  imageB64: string;
  /** The five points the `liveness` job returned for the chosen face. */
  landmarks5: [number, number][];
  /** Key that seals the result's embedding (shared/sealed-embedding.ts); lives only in this job. */
  resultKey: string;
}

/**
 * `ok: false` only for an image the engine cannot decode (the API normalises uploads first, so this
 * is a safety net); engine faults fail the job instead (the API answers 503).
 */
export type EmbedResult =
  | {
      ok: true;
      /** 512 floats, L2-normalised, sealed with the job's resultKey (never in clear in Redis). */
      sealedEmbedding: SealedEmbedding;
      engineVersion: string;
      ms: number;
    }
  | { ok: false; code: 'invalid_image'; ms: number };

export const embedContract = awaitedJobContract<typeof EMBED_QUEUE, EmbedJob>(EMBED_QUEUE);
