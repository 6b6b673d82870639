/**
 * The probe embedding of a `search` job travels as a sealed value beside the job (./handoff.ts, kind
 * `embedding`), like the image and the aligned face before it; the job carries its ref and salt only.
 *
 * Why not the embedding in the payload (as plain numbers, or sealed there): the payload lives as long
 * as its job hash, and a job hash is removed by the worker when it finishes, or by the API when its
 * deadline passes before a worker starts it; but that withdrawal is best effort. When the API process
 * dies after the add and no search worker runs, the job waits with its payload until a worker comes,
 * possibly long after. A sealed value expires at the request's deadline whatever happens (Redis PX),
 * so after the deadline what may remain is a ref to nothing and a salt to nothing. (The salt opens
 * nothing alone: the key is derived from it and the processes' key ring, ./sealing.ts.)
 *
 * Cost: the API writes the value on the connection that adds the job, just before it (no extra round
 * trip); the embed worker does the same before adding a follow-on search; the search worker takes it
 * with one GETDEL (one round trip) before it searches.
 */
import { decodeEmbedding, encodeEmbedding } from '../face/embeddings.js';
import { handoffKey, newHandoffRef, type FaceHandoff } from './handoff.js';
import { newHandoffSalt, type HandoffSealer } from './sealing.js';

/** What a search job carries instead of the embedding. */
export interface SealedEmbeddingRef {
  /** Ref of the sealed value (kind `embedding`). */
  embeddingRef: string;
  /**
   * Salt of the key that opens it (with the key ring: ./sealing.ts); lives only in this job (and, until
   * the job is added, in its sender's memory).
   */
  embeddingSalt: string;
}

/** A search embedding sealed under a fresh salt: the job's ref and salt, and the bytes to keep in Redis until the deadline. */
export function sealSearchEmbedding(sealer: HandoffSealer, embedding: ArrayLike<number>): { ref: SealedEmbeddingRef; sealed: Buffer } {
  const embeddingSalt = newHandoffSalt();
  return { ref: { embeddingRef: newHandoffRef(), embeddingSalt }, sealed: sealer.seal(encodeEmbedding(embedding), embeddingSalt) };
}

/** The same, as a value JobClient writes just before the job (StartOptions.withValues). */
export function searchEmbeddingValue(
  redisPrefix: string,
  sealer: HandoffSealer,
  embedding: ArrayLike<number>,
): { ref: SealedEmbeddingRef; value: { key: string; value: Buffer } } {
  const { ref, sealed } = sealSearchEmbedding(sealer, embedding);
  return { ref, value: { key: handoffKey(redisPrefix, 'embedding', ref.embeddingRef), value: sealed } };
}

/**
 * Takes (once) and opens the embedding of a search job. Gone (the deadline passed, or taken already)
 * or not opening with the job's salt is a fault of the path: throws, the job fails, the request answers 503.
 */
export async function takeSearchEmbedding(handoff: FaceHandoff, job: SealedEmbeddingRef): Promise<Float32Array> {
  const sealed = await handoff.take('embedding', job.embeddingRef);
  if (!sealed) throw new Error('the embedding of the search job is gone (expired or already taken)');
  return decodeEmbedding(handoff.sealer.open(sealed, job.embeddingSalt));
}
