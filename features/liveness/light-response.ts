/**
 * The screen-light check of a liveness session (SPEC 14.1): the server draws a sequence of colours,
 * the client shows each over most of its screen and captures one "light frame" under it with the face
 * at the centre pose, and this module judges whether the face's colour followed the sequence. Pure
 * functions, no I/O: the service, the tests and `npm run evaluate -- liveness` judge alike.
 *
 * Why it binds a session to the moment: a phone or laptop screen at 20 to 40 cm lights the face
 * measurably (the face is near; the room behind it is not), so frames captured under the session's
 * own colours carry them on the skin. A recording made before the session was drawn carries another
 * sequence or none; painting the response on afterwards is possible for an attacker who controls the
 * client (a known limit, measured by the evaluation as `photo_warp_relit`), not for one who replays.
 *
 * The measure, per light frame i (sampleLightFrame):
 * - F_i, B_i: mean *linear* RGB (sRGB decoded) of the skin (the inner part of the detector box: cheeks,
 *   nose, mouth, forehead) and of the background (the image outside the box enlarged 1.6 times, in the
 *   rows beside and above the head: the room, which the screen barely reaches; the torso below the face
 *   is left out, being as near to the screen as the face). Linear, because light adds in linear units.
 * - r_i[c] = ln(F_i[c] / B_i[c]), per channel c. A change that multiplies face and background alike —
 *   the camera's exposure or white balance, a lamp switched on, a cloud — adds the same constant to
 *   both logs and cancels. The skin's own colour (albedo) also cancels in what follows: the screen adds
 *   k·colour to the light the skin receives, so F = albedo·(A + k·colour) and ln F moves by
 *   ln(1 + k·colour/A) whatever the albedo.
 * - chromaticity: x_i = r_i − mean over channels of r_i. The overall brightness is dropped: it is what
 *   auto-exposure and a person moving nearer the screen change most, and what a white screen alone
 *   would have to carry (white reads as "no change of colour", a valid step of the sequence).
 * - d_i = x_i − mean over frames of x: what varies between the light frames.
 * Expected, from the colours asked (0 or 1 per channel): e_i = chromaticity of colour_i, centred over
 * the frames in the same way. Then, over the 3·n numbers:
 * - correlation: Pearson's r of d against e (does the face follow this sequence, not another);
 * - strength: the least-squares slope of d on e (0 when negative) — in natural-log units, about the
 *   fraction by which the screen raised the lit channel of the face relative to the room: 0.05 is a
 *   face whose red rose 5 % more than the background's when the screen turned red;
 * - spread: how far the face's colour moved at all (the slope a perfect correlation would give), which
 *   tells "too weak to read" (nothing moved) from "follows another sequence" (it moved, elsewhere).
 *
 * The verdict: `count` when the light frames are not one per colour, `no_face` when one has no face,
 * `weak` when the spread or the strength is below `minStrength`, `uncorrelated` when the correlation
 * is below `minCorrelation`. Thresholds, chance acceptance and the strength a screen delivers are
 * measured on real footage in docs/face-engine.md "Screen light".
 */

/** The colours a session's lights are drawn from (SPEC 14.1). */
export const LIGHT_COLOURS: readonly string[] = Object.freeze(['#FF0000', '#00FF00', '#0000FF', '#FFFF00', '#FF00FF', '#00FFFF', '#FFFFFF']);

/**
 * The thresholds of the light check, set on real frames of the tuning clips (cap12_edit,
 * cap13_edit2; docs/face-engine.md "Screen light", `npm run evaluate -- liveness-footage`). Without
 * any flash, the face's colour against the room still wanders by a spread of 0.03 (median) to 0.1
 * between frames half a second apart (the person moves, the webcam adapts); random sequences are then
 * accepted 0.03 % of the time (0.15 to 0.18 % at 0.7 and 0.02). With a synthetic reflection, 95 % of
 * sequences pass from a screen-to-room illuminance ratio of 0.10 (cap12) to 0.15 (cap13); a stricter
 * correlation (0.8 to 0.9) buys a lower chance match, already below the 0.1 % aimed at, for a
 * reflection half as strong again.
 */
export const LIGHT_THRESHOLDS: { readonly minCorrelation: number; readonly minStrength: number } = Object.freeze({
  minCorrelation: 0.7,
  minStrength: 0.04,
});

/**
 * Draws `count` colours from LIGHT_COLOURS, never the same twice in a row: the first uniformly, each
 * next one uniformly among the six others. `randomInt(n)` returns a uniform integer in [0, n)
 * (crypto.randomInt in the service).
 */
export function drawLights(count: number, randomInt: (maxExclusive: number) => number): string[] {
  if (!Number.isInteger(count) || count < 1) throw new RangeError('count must be a positive integer');
  const n = LIGHT_COLOURS.length;
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    if (i === 0) out.push(randomInt(n));
    else {
      // Skip the previous colour: draw among the n − 1 others.
      const j = randomInt(n - 1);
      out.push(j >= out[i - 1]! ? j + 1 : j);
    }
  }
  return out.map((k) => LIGHT_COLOURS[k]!);
}

/** A colour `#RRGGBB` as three channels 0 or 1 (its share of the screen's full drive). */
export function colourChannels(hex: string): [number, number, number] {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex);
  if (!m) throw new RangeError(`not a #RRGGBB colour: ${hex}`);
  return [parseInt(m[1]!, 16) / 255, parseInt(m[2]!, 16) / 255, parseInt(m[3]!, 16) / 255];
}

/** Mean RGB of the face's skin and of the background, linear light scaled to 0..255. */
export interface LightSample {
  face: [number, number, number];
  background: [number, number, number];
}

export interface LightVerdict {
  followed: boolean;
  why?: 'count' | 'no_face' | 'weak' | 'uncorrelated';
  /** Pearson's r of the face's colour changes against the sequence's (NaN when not computed). */
  correlation: number;
  /** Fitted response along the sequence (≈ the fractional rise of the lit channel), 0 when negative. */
  strength: number;
  /** The response's size whatever its direction (the strength a perfect correlation would give). */
  spread: number;
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

/** Linear light floor (0..255 units) added before the logarithm: a black region reads as noise, not −∞. */
const DARK_FLOOR = 0.5;

/** Chromaticity of a log-RGB triple: each channel minus the three's mean. */
const chroma = (v: readonly number[]): number[] => {
  const m = (v[0]! + v[1]! + v[2]!) / 3;
  return [v[0]! - m, v[1]! - m, v[2]! - m];
};

/** Each frame's triple minus the frames' mean, flattened to 3·n numbers. */
function centreOverFrames(rows: readonly number[][]): number[] {
  const n = rows.length;
  const mean = [0, 0, 0];
  for (const r of rows) for (let c = 0; c < 3; c++) mean[c]! += r[c]! / n;
  return rows.flatMap((r) => [r[0]! - mean[0]!, r[1]! - mean[1]!, r[2]! - mean[2]!]);
}

/** The expected pattern of a sequence: each colour's chromaticity, centred over the frames. */
export function expectedPattern(lights: readonly string[]): number[] {
  return centreOverFrames(lights.map((l) => chroma(colourChannels(l))));
}

/** The observed pattern of samples: ln(face / background) per channel, chromaticity, centred over the frames. */
export function observedPattern(samples: readonly LightSample[]): number[] {
  return centreOverFrames(samples.map((s) => chroma([0, 1, 2].map((c) => Math.log((s.face[c]! + DARK_FLOOR) / (s.background[c]! + DARK_FLOOR))))));
}

/** Correlation, slope and spread of an observed pattern against an expected one. */
export function fitResponse(observed: readonly number[], expected: readonly number[]): { correlation: number; strength: number; spread: number } {
  let de = 0,
    ee = 0,
    dd = 0;
  for (let k = 0; k < expected.length; k++) {
    de += observed[k]! * expected[k]!;
    ee += expected[k]! ** 2;
    dd += observed[k]! ** 2;
  }
  if (ee === 0) return { correlation: 0, strength: 0, spread: 0 };
  const spread = Math.sqrt(dd / ee);
  const correlation = dd > 0 ? de / Math.sqrt(dd * ee) : 0;
  return { correlation, strength: Math.max(0, de / ee), spread };
}

/**
 * Whether the face's colour over the light frames follows `lights`. `samples[i]` is light frame i's
 * sample, null when no face was found in it; a count other than `lights.length` is `count`.
 */
export function judgeLightResponse(
  lights: readonly string[],
  samples: readonly (LightSample | null)[],
  thresholds: { readonly minCorrelation: number; readonly minStrength: number } = LIGHT_THRESHOLDS,
): LightVerdict {
  const none = { correlation: Number.NaN, strength: 0, spread: 0 };
  if (lights.length < 2 || samples.length !== lights.length) return { followed: false, why: 'count', ...none };
  if (samples.some((s) => s === null)) return { followed: false, why: 'no_face', ...none };
  const fit = fitResponse(observedPattern(samples as LightSample[]), expectedPattern(lights));
  if (fit.spread < thresholds.minStrength) return { followed: false, why: 'weak', ...fit };
  if (fit.correlation < thresholds.minCorrelation) return { followed: false, why: 'uncorrelated', ...fit };
  if (fit.strength < thresholds.minStrength) return { followed: false, why: 'weak', ...fit };
  return { followed: true, ...fit };
}
