/**
 * What the light check measures on a light frame's pixels: its face's 32×32 grey grid (the near-copy
 * sketch and the light frames' continuity: features/liveness/frame-sketch.ts) and its colour sample
 * (features/liveness/light-response.ts). Pure functions on decoded pixels, here on the floor because
 * the process that decodes a light frame measures it: the face process, in the light job
 * (platform/jobs/light.ts), for a frame the API hands on as it came.
 */

export const GRID = 32;

/** The embedder's 112-pixel alignment template (ArcFace), the five points' places on the grid. */
const TEMPLATE_112: readonly (readonly [number, number])[] = [
  [38.2946, 51.6963],
  [73.5318, 51.5014],
  [56.0252, 71.7366],
  [41.5493, 92.3655],
  [70.7299, 92.2041],
];

export interface RgbImage {
  data: Uint8Array;
  width: number;
  height: number;
  /** 3 (RGB) unless said. */
  channels?: number;
}

/**
 * The unit-length, zero-mean 32×32 grey grid of the face whose five landmarks (image pixels: eyes,
 * nose tip, mouth corners) are given.
 */
export function faceGrid(img: RgbImage, landmarks5: readonly (readonly [number, number])[]): Float32Array {
  if (landmarks5.length !== 5) throw new RangeError('expected 5 landmarks');
  const ch = img.channels ?? 3;
  const s = GRID / 112;
  const dst = TEMPLATE_112.map(([x, y]) => [x * s, y * s] as const);
  // Least-squares similarity from the grid (dst) to the image (src): src ≈ a·dst + t, a complex.
  const mean = (pts: readonly (readonly [number, number])[]) =>
    [pts.reduce((a, p) => a + p[0], 0) / pts.length, pts.reduce((a, p) => a + p[1], 0) / pts.length] as const;
  const [mdx, mdy] = mean(dst);
  const [msx, msy] = mean(landmarks5);
  let re = 0,
    im = 0,
    nd = 0;
  for (let k = 0; k < 5; k++) {
    const dx = dst[k]![0] - mdx,
      dy = dst[k]![1] - mdy;
    const sx = landmarks5[k]![0] - msx,
      sy = landmarks5[k]![1] - msy;
    re += sx * dx + sy * dy;
    im += sy * dx - sx * dy;
    nd += dx * dx + dy * dy;
  }
  const ar = re / nd,
    ai = im / nd;
  const { width: w, height: h, data } = img;
  // The bilinear grey samples inline, with no closure made per sample: this runs 16 384 times a grid,
  // several grids a liveness session, and a closure per call (with the name helper tsx adds) cost more
  // than the arithmetic.
  const luma3 = ch >= 3;
  const out = new Float32Array(GRID * GRID);
  const SUB = 4;
  let sum = 0;
  for (let gy = 0; gy < GRID; gy++) {
    for (let gx = 0; gx < GRID; gx++) {
      let acc = 0;
      for (let j = 0; j < SUB; j++) {
        for (let i = 0; i < SUB; i++) {
          const dx = gx + (i + 0.5) / SUB - mdx,
            dy = gy + (j + 0.5) / SUB - mdy;
          const x = msx + ar * dx - ai * dy - 0.5,
            y = msy + ai * dx + ar * dy - 0.5;
          const cx = Math.min(w - 1, Math.max(0, x)),
            cy = Math.min(h - 1, Math.max(0, y));
          const x0 = Math.floor(cx),
            y0 = Math.floor(cy);
          const x1 = Math.min(w - 1, x0 + 1),
            y1 = Math.min(h - 1, y0 + 1);
          const fx = cx - x0,
            fy = cy - y0;
          const o00 = (y0 * w + x0) * ch,
            o10 = (y0 * w + x1) * ch,
            o01 = (y1 * w + x0) * ch,
            o11 = (y1 * w + x1) * ch;
          const v00 = luma3 ? 0.299 * data[o00]! + 0.587 * data[o00 + 1]! + 0.114 * data[o00 + 2]! : data[o00]!;
          const v10 = luma3 ? 0.299 * data[o10]! + 0.587 * data[o10 + 1]! + 0.114 * data[o10 + 2]! : data[o10]!;
          const v01 = luma3 ? 0.299 * data[o01]! + 0.587 * data[o01 + 1]! + 0.114 * data[o01 + 2]! : data[o01]!;
          const v11 = luma3 ? 0.299 * data[o11]! + 0.587 * data[o11 + 1]! + 0.114 * data[o11 + 2]! : data[o11]!;
          acc += (v00 * (1 - fx) + v10 * fx) * (1 - fy) + (v01 * (1 - fx) + v11 * fx) * fy;
        }
      }
      const v = acc / (SUB * SUB);
      out[gy * GRID + gx] = v;
      sum += v;
    }
  }
  const m = sum / out.length;
  let norm = 0;
  for (let i = 0; i < out.length; i++) {
    out[i] = out[i]! - m;
    norm += out[i]! ** 2;
  }
  norm = Math.sqrt(norm) || 1;
  for (let i = 0; i < out.length; i++) out[i] = out[i]! / norm;
  return out;
}

/** Mean RGB of the face's skin and of the background, linear light scaled to 0..255. */
export interface LightSample {
  face: [number, number, number];
  background: [number, number, number];
}

/** sRGB byte → linear light, 0..255 (the IEC 61966-2-1 curve). */
const SRGB_TO_LINEAR = (() => {
  const t = new Float64Array(256);
  for (let v = 0; v < 256; v++) {
    const c = v / 255;
    t[v] = 255 * (c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4);
  }
  return t;
})();

/** How much the background's exclusion zone exceeds the detector box (about its centre). */
const BACKGROUND_MARGIN = 1.6;

/**
 * The skin and background means of one light frame. `image`: packed RGB (3 channels, as
 * platform/face/image.ts RgbImage); `box`: [x, y, w, h] of the detector's face box in its pixels.
 * Skin: the box's inner part (x from 20 % to 80 % of the width, y from 25 % to 90 % of the height).
 * Background: pixels outside the box enlarged BACKGROUND_MARGIN times about its centre, in the rows
 * above the box's bottom; when the face fills the frame so that none are left, the pixels outside
 * the box itself (a weaker contrast, never a division by nothing).
 */
export function sampleLightFrame(image: { data: Uint8Array; width: number; height: number }, box: [number, number, number, number]): LightSample {
  const { data, width, height } = image;
  if (data.length < width * height * 3) throw new RangeError('image data shorter than width × height × 3');
  const [bx, by, bw, bh] = box;
  const clampX = (v: number) => Math.min(width, Math.max(0, Math.round(v)));
  const clampY = (v: number) => Math.min(height, Math.max(0, Math.round(v)));
  const fx0 = clampX(bx + 0.2 * bw);
  const fx1 = clampX(bx + 0.8 * bw);
  const fy0 = clampY(by + 0.25 * bh);
  const fy1 = clampY(by + 0.9 * bh);
  const face = meanRect(data, width, fx0, fy0, fx1, fy1);

  const cx = bx + bw / 2;
  const cy = by + bh / 2;
  const outside = (m: number, rowsTo: number) => {
    const x0 = cx - (m * bw) / 2;
    const x1 = cx + (m * bw) / 2;
    const y0 = cy - (m * bh) / 2;
    const y1 = cy + (m * bh) / 2;
    // A row inside the box's band is summed in two runs, left of the box and right of it (an integer
    // x is left of x0 below ceil(x0), right of x1 from ceil(x1) on), in the same order as pixel by
    // pixel: the same sums, without a test per pixel.
    const left = Math.min(width, Math.max(0, Math.ceil(x0)));
    const right = Math.min(width, Math.max(left, Math.ceil(x1)));
    let s0 = 0,
      s1 = 0,
      s2 = 0,
      n = 0;
    const rows = clampY(rowsTo);
    for (let y = 0; y < rows; y++) {
      const inRows = y >= y0 && y < y1;
      const row = y * width * 3;
      const end = inRows ? left : width;
      for (let p = row, stop = row + end * 3; p < stop; p += 3) {
        s0 += SRGB_TO_LINEAR[data[p]!]!;
        s1 += SRGB_TO_LINEAR[data[p + 1]!]!;
        s2 += SRGB_TO_LINEAR[data[p + 2]!]!;
      }
      n += end;
      if (!inRows) continue;
      for (let p = row + right * 3, stop = row + width * 3; p < stop; p += 3) {
        s0 += SRGB_TO_LINEAR[data[p]!]!;
        s1 += SRGB_TO_LINEAR[data[p + 1]!]!;
        s2 += SRGB_TO_LINEAR[data[p + 2]!]!;
      }
      n += width - right;
    }
    return { sum: [s0, s1, s2], n };
  };
  let bg = outside(BACKGROUND_MARGIN, by + bh);
  // Too few pixels (under 2 % of the image) to stand for the room: widen to the whole image outside the box.
  if (bg.n < 0.02 * width * height) bg = outside(1, height);
  const background: [number, number, number] = bg.n > 0 ? [bg.sum[0]! / bg.n, bg.sum[1]! / bg.n, bg.sum[2]! / bg.n] : [...face];
  return { face, background };
}

function meanRect(data: Uint8Array, width: number, x0: number, y0: number, x1: number, y1: number): [number, number, number] {
  const sum = [0, 0, 0];
  let n = 0;
  for (let y = y0; y < y1; y++) {
    for (let x = x0; x < x1; x++) {
      const p = (y * width + x) * 3;
      sum[0] += SRGB_TO_LINEAR[data[p]!]!;
      sum[1] += SRGB_TO_LINEAR[data[p + 1]!]!;
      sum[2] += SRGB_TO_LINEAR[data[p + 2]!]!;
      n++;
    }
  }
  if (n === 0) return [0, 0, 0];
  return [sum[0]! / n, sum[1]! / n, sum[2]! / n];
}
