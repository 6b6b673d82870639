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

import type { LightSample } from '../../platform/face/frame-measures.js';

export { sampleLightFrame, type LightSample } from '../../platform/face/frame-measures.js';

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
