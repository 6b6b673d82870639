/**
 * Face embedding with `fr_feature.onnx` (MobileFaceNet).
 *
 * Model contract (faceplugin's fr_feature.js): input `input` 1x3x112x112 of the face aligned to the
 * ArcFace template, RGB, (v - 127) / 128; output `output` 1x512, not normalised. The embedding is
 * L2-normalised here, so that the cosine similarity of two embeddings is their dot product.
 */
import * as ort from 'onnxruntime-node';
import { assertEmbedding, normalised } from '../../../shared/embeddings.js';
import type { RgbImage } from '../../../shared/face/image.js';
import { alignFace, toPlanar, ALIGNED_SIZE, type Point } from './align.js';

export const EMBED_MEAN = 127;
export const EMBED_STD = 128;

/** Embed the aligned 112x112 RGB crop (interleaved float 0..255). */
export async function embedAligned(session: ort.InferenceSession, aligned: Float32Array): Promise<Float32Array> {
  const S = ALIGNED_SIZE;
  const out = await session.run({ input: new ort.Tensor('float32', toPlanar(aligned, S, S, EMBED_MEAN, EMBED_STD), [1, 3, S, S]) });
  const v = out['output']!.data as Float32Array;
  // A wrong size, a non-finite value or a zero vector is an engine fault, never a face outcome.
  assertEmbedding(v, 'embedder output');
  return normalised(v);
}

/** Align the face given by its five points, then embed it: a 512-d L2-normalised vector. */
export async function embedFace(session: ort.InferenceSession, img: RgbImage, landmarks5: readonly Point[]): Promise<Float32Array> {
  return embedAligned(session, alignFace(img, landmarks5).rgb);
}
