/**
 * 68-point facial landmarks with `fr_landmark.onnx`, and the five points used for alignment.
 *
 * Model contract (faceplugin's fr_landmark.js): input `input` 1x1x64x64, grey, value / 256, of the
 * square face crop; output `output` 1x136 = (x, y) x 68 in the iBUG-300W order, normalised to the
 * crop (0 = left/top edge, 1 = right/bottom edge).
 *
 * The crop is the detector box made square (side = box height, same centre), as in the package.
 * Where that square extends past the image (close-ups), the missing part is filled by repeating the
 * edge pixels instead of shrinking the crop (which the package does, and then maps the points back
 * as if it had not): the face keeps the position and scale the model expects, and the mapping back
 * is exact.
 */
import * as ort from 'onnxruntime-node';
import type { RgbImage } from '../../../../platform/face/image.js';
import { cropResize, type Point, type Rect, type WarpOptions } from './align.js';
import type { Detection } from './detect.js';

export const LANDMARK_INPUT_SIZE = 64;
export const LANDMARK_SCALE = 1 / 256;
export const LANDMARK_WARP: WarpOptions = { border: 'replicate', antialias: true };

/** The detector box made square: side = box height, same centre (faceplugin's scaleResult). */
export function squareBox(d: Pick<Detection, 'x1' | 'y1' | 'x2' | 'y2'>): Rect {
  const side = d.y2 - d.y1;
  const cx = (d.x1 + d.x2) / 2;
  const cy = (d.y1 + d.y2) / 2;
  return { x: cx - side / 2, y: cy - side / 2, w: side, h: side };
}

export interface Landmarks {
  /** 68 points in image coordinates. */
  points68: Point[];
  /** The crop the model saw. */
  crop: Rect;
}

export async function predictLandmarks(session: ort.InferenceSession, img: RgbImage, crop: Rect, warp: WarpOptions = LANDMARK_WARP): Promise<Landmarks> {
  const S = LANDMARK_INPUT_SIZE;
  const rgb = cropResize(img, crop, S, S, warp);
  const grey = new Float32Array(S * S);
  for (let p = 0, i = 0; p < S * S; p++, i += 3) {
    // ITU-R BT.601 luma, as OpenCV's RGB2GRAY
    grey[p] = (0.299 * rgb[i]! + 0.587 * rgb[i + 1]! + 0.114 * rgb[i + 2]!) * LANDMARK_SCALE;
  }
  const out = await session.run({ input: new ort.Tensor('float32', grey, [1, 1, S, S]) });
  const v = out['output']!.data as Float32Array;
  if (v.length !== 136) throw new Error(`landmark model returned ${v.length} values, expected 136`);
  const points68: Point[] = [];
  for (let k = 0; k < 68; k++) {
    points68.push([crop.x + v[2 * k]! * crop.w, crop.y + v[2 * k + 1]! * crop.h]);
  }
  return { points68, crop };
}

function mean(points: readonly Point[], idx: readonly number[]): Point {
  let x = 0,
    y = 0;
  for (const i of idx) {
    x += points[i]![0];
    y += points[i]![1];
  }
  return [x / idx.length, y / idx.length];
}

/**
 * The five alignment points from the 68 (0-based iBUG indices), as faceplugin's convert68pts5pts:
 * eye centres = mean of the four eyelid points (37, 38, 40, 41 and 43, 44, 46, 47; the corners are
 * left out), nose tip = 30, mouth corners = mean of the outer and inner lip corner (48 and 60, 54
 * and 64). Order: image-left eye, image-right eye, nose, image-left mouth corner, image-right mouth
 * corner, matching the ArcFace template.
 */
export function fivePoints(points68: readonly Point[]): Point[] {
  if (points68.length !== 68) throw new RangeError('expected 68 landmarks');
  return [mean(points68, [37, 38, 40, 41]), mean(points68, [43, 44, 46, 47]), mean(points68, [30]), mean(points68, [48, 60]), mean(points68, [54, 64])];
}
