/**
 * Passive (single-image) anti-spoofing with `fr_liveness.onnx`, a MiniFASNet-style model.
 *
 * Model contract (faceplugin's fr_liveness.js, which follows minivision's Silent-Face-Anti-Spoofing):
 * - the crop is the square face box scaled 2.7x about its centre; when that does not fit, the scale
 *   is reduced until it fits in the image and the crop is shifted inside the image (never padded:
 *   an artificial border is exactly the kind of cue an anti-spoofing model reacts to);
 * - input `input` 1x3x128x128, RGB, raw 0..255 values (no mean, no scaling);
 * - output `output` 1x3 logits; softmax; class 0 = live (the package reports `softmax(output)[0]` as
 *   its liveness result), classes 1 and 2 = the two attack classes.
 */
import * as ort from 'onnxruntime-node';
import type { RgbImage } from '../../../../platform/face/image.js';
import { cropResize, toPlanar, type Rect, type WarpOptions } from './align.js';

export const LIVENESS_INPUT_SIZE = 128;
export const LIVENESS_CROP_SCALE = 2.7;
export const LIVENESS_LIVE_CLASS = 0;
/**
 * Resampling of the liveness crop: plain bilinear like the package's cv.resize (INTER_LINEAR). The
 * model was trained on crops resized that way; its decision leans on fine texture (moiré, print
 * dots, screen pixels), so the crop is not low-pass filtered here.
 */
export const LIVENESS_WARP: WarpOptions = { border: 'replicate', antialias: false };

/** The 2.7x crop around a (square) face box, reduced and shifted to fit inside the image. */
export function livenessCrop(box: Rect, width: number, height: number, scaleWanted = LIVENESS_CROP_SCALE): Rect {
  const scale = Math.min(height / box.h, width / box.w, scaleWanted);
  const w = box.w * scale;
  const h = box.h * scale;
  const cx = box.x + box.w / 2;
  const cy = box.y + box.h / 2;
  let x = cx - w / 2;
  let y = cy - h / 2;
  if (x < 0) x = 0;
  if (y < 0) y = 0;
  if (x + w > width) x = width - w;
  if (y + h > height) y = height - h;
  return { x, y, w, h };
}

export function softmax(logits: ArrayLike<number>): number[] {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i]!);
  const e: number[] = [];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) {
    const v = Math.exp(logits[i]! - max);
    e.push(v);
    sum += v;
  }
  return e.map((v) => v / sum);
}

export interface LivenessScore {
  /** Probability of class 0 (live). */
  live: number;
  /** All three class probabilities. */
  probs: number[];
  crop: Rect;
}

export async function scoreLiveness(session: ort.InferenceSession, img: RgbImage, faceSquare: Rect, warp: WarpOptions = LIVENESS_WARP): Promise<LivenessScore> {
  const S = LIVENESS_INPUT_SIZE;
  const crop = livenessCrop(faceSquare, img.width, img.height);
  const rgb = cropResize(img, crop, S, S, warp);
  const out = await session.run({ input: new ort.Tensor('float32', toPlanar(rgb, S, S, 0, 1), [1, 3, S, S]) });
  const logits = out['output']!.data as Float32Array;
  if (logits.length !== 3) throw new Error(`liveness model returned ${logits.length} values, expected 3`);
  const probs = softmax(logits);
  return { live: probs[LIVENESS_LIVE_CLASS]!, probs, crop };
}
