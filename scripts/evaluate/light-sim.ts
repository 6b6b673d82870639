/**
 * A screen's light simulated on a real frame, for the light check's tests and measurements
 * (features/liveness/light-response.ts, docs/face-engine.md "Screen light"). Pure, no I/O.
 *
 * Model: a pixel's linear value is albedo × the light it receives. A screen showing colour c (0 or 1
 * per channel) adds to the ambient illuminance E a share k·E in each channel it drives, so the pixel
 * becomes value × (1 + k·c) in linear light: k is the ratio of the screen's illuminance to the room's
 * where the face is. The face (the detector box's ellipse) receives k; everything else receives
 * k × `backgroundShare` (a wall three times as far as the face gets a ninth). Values that exceed the
 * sensor's range clip, as a camera's do.
 */
import { colourChannels } from '../../features/liveness/light-response.js';
import type { Rgb } from './liveness-views.js';

export type RgbFrame = Rgb;

const TO_LINEAR = (() => {
  const t = new Float64Array(256);
  for (let v = 0; v < 256; v++) {
    const c = v / 255;
    t[v] = c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  }
  return t;
})();

const toSrgbByte = (lin: number): number => {
  const l = Math.min(1, Math.max(0, lin));
  const c = l <= 0.0031308 ? 12.92 * l : 1.055 * l ** (1 / 2.4) - 0.055;
  return Math.round(255 * c);
};

export interface RelightOptions {
  /** Screen-to-room illuminance ratio at the face. */
  k: number;
  /** The background's share of k (default 0.1). */
  backgroundShare?: number;
  /**
   * The whole frame multiplied by this per channel after the light (a camera's exposure or white
   * balance moving, a lamp's colour): what the check must not read as a response.
   */
  gain?: readonly [number, number, number];
}

/** `frame` as lit by a screen showing `colour` (#RRGGBB); the box is the detector's [x, y, w, h]. */
export function relight(frame: RgbFrame, box: readonly [number, number, number, number], colour: string, o: RelightOptions): RgbFrame {
  const c = colourChannels(colour);
  const share = o.backgroundShare ?? 0.1;
  const gain = o.gain ?? [1, 1, 1];
  const [bx, by, bw, bh] = box;
  const cx = bx + bw / 2,
    cy = by + bh / 2,
    rx = bw / 2,
    ry = bh / 2;
  const { width, height, data } = frame;
  // Two multipliers per channel (face, room): a byte-to-byte table for each.
  const table = (factor: number) => Uint8Array.from({ length: 256 }, (_, v) => toSrgbByte(TO_LINEAR[v]! * factor));
  const faceT = [0, 1, 2].map((ch) => table((1 + o.k * c[ch]!) * gain[ch]!));
  const roomT = [0, 1, 2].map((ch) => table((1 + o.k * share * c[ch]!) * gain[ch]!));
  const out = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const t = ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 <= 1 ? faceT : roomT;
      const p = (y * width + x) * 3;
      out[p] = t[0]![data[p]!]!;
      out[p + 1] = t[1]![data[p + 1]!]!;
      out[p + 2] = t[2]![data[p + 2]!]!;
    }
  }
  return { data: out, width, height };
}

/** Sensor noise: each byte moved by a uniform integer in [−amplitude, amplitude]. */
export function addNoise(frame: RgbFrame, amplitude: number, r: () => number): RgbFrame {
  const out = Buffer.alloc(frame.data.length);
  for (let i = 0; i < out.length; i++) out[i] = Math.min(255, Math.max(0, frame.data[i]! + Math.round((2 * r() - 1) * amplitude)));
  return { data: out, width: frame.width, height: frame.height };
}
