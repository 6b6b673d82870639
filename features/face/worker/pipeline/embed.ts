/**
 * Face embedding with `fr_feature.onnx` (MobileFaceNet).
 *
 * Model contract (faceplugin's fr_feature.js): input `input` 1x3x112x112 of the face aligned to the
 * ArcFace template, RGB, (v - 127) / 128; output `output` 1x512, not normalised. The embedding is
 * L2-normalised here, so that the cosine similarity of two embeddings is their dot product.
 */
import * as ort from 'onnxruntime-node';
import { assertEmbedding, normalised } from '../../../../platform/face/embeddings.js';
import type { RgbImage } from '../../../../platform/face/image.js';
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

/**
 * The aligned face as it crosses from the liveness stage to the embed stage: 112x112 interleaved RGB
 * as unsigned 16-bit fixed point (value x 256, little-endian), 75,264 bytes. The warp's output is
 * fractional (anti-aliased); 8 bits would move scores by up to 0.005 on the fixtures, 1/256 of a grey
 * level moves them by at most 2e-5.
 */
export const ALIGNED_FACE_BYTES = ALIGNED_SIZE * ALIGNED_SIZE * 3 * 2;

export function encodeAlignedFace(rgb: Float32Array): Buffer {
  if (rgb.length !== ALIGNED_SIZE * ALIGNED_SIZE * 3) throw new RangeError('aligned face must be 112x112x3');
  const out = Buffer.allocUnsafe(ALIGNED_FACE_BYTES);
  for (let i = 0; i < rgb.length; i++) out.writeUInt16LE(Math.min(65535, Math.max(0, Math.round(rgb[i]! * 256))), 2 * i);
  return out;
}

export function decodeAlignedFace(buf: Uint8Array): Float32Array {
  if (buf.length !== ALIGNED_FACE_BYTES) throw new RangeError(`aligned face must be ${ALIGNED_FACE_BYTES} bytes, got ${buf.length}`);
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.length);
  const out = new Float32Array(ALIGNED_SIZE * ALIGNED_SIZE * 3);
  for (let i = 0; i < out.length; i++) out[i] = b.readUInt16LE(2 * i) / 256;
  return out;
}

/** Align the face given by its five points, then embed it: a 512-d L2-normalised vector. */
export async function embedFace(session: ort.InferenceSession, img: RgbImage, landmarks5: readonly Point[]): Promise<Float32Array> {
  return embedAligned(session, alignFace(img, landmarks5).rgb);
}
