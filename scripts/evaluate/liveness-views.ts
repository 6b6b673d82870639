/**
 * Head poses synthesised from one frontal photograph, for liveness sessions' bona fide sequences (no
 * video of turned heads ships in any package reachable here), and the attacks built from the same
 * photos. Used by `npm run evaluate -- liveness` (scripts/evaluate/liveness.ts) and by
 * scripts/evaluate/make-liveness-fixtures.ts, which writes the frames the HTTP tests send.
 *
 * How a view is made. The face is given a depth map: a smooth dome over an ellipse around the face
 * (centred between the eyes and the mouth, 1.15 inter-ocular distances wide and 1.6 high, height 0.8
 * IOD, falling to 0 with zero slope at its edge) plus a nose ridge (a Gaussian of 0.45 IOD at the
 * nose, 0.3 IOD wide). A yaw (about the vertical axis) or a pitch (about the horizontal one) rotates
 * every pixel with its depth and projects it back orthographically (each output pixel is found by a
 * fixed-point inverse of the forward map, bilinear sampling): the nose moves across the face more
 * than the eyes and the cheeks, the far side compresses, the background stays where it was. This is
 * what a head turn does to the landmarks; it is not what it does to the pixels (no occlusion of the
 * far cheek, no change of light, no new side of the head): see docs/face-engine.md "Liveness sessions"
 * for what that means for the figures.
 */
import sharp from 'sharp';

export type Pt = readonly [number, number];

export interface Rgb {
  data: Buffer;
  width: number;
  height: number;
}

export interface ViewOptions {
  /** Degrees; positive: the person turns to their own left (the nose towards the image's right). */
  yaw?: number;
  /** Degrees; positive: the person looks up (the nose towards the top of the image). */
  pitch?: number;
  /** Scale about the face centre and shift in pixels: the person moving a little towards the camera or aside. */
  scale?: number;
  dx?: number;
  dy?: number;
  /** Brightness factor (light changing a little between frames). */
  gain?: number;
  /** Seed of the sensor noise added (±2 levels), so that no two frames are alike. */
  noiseSeed?: number;
}

export async function decodeRgb(image: Buffer): Promise<Rgb> {
  const { data, info } = await sharp(image).removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
  if (info.channels !== 3) {
    const rgb = await sharp(image).removeAlpha().toColourspace('srgb').raw().toBuffer();
    return { data: rgb, width: info.width, height: info.height };
  }
  return { data, width: info.width, height: info.height };
}

export async function encodeJpeg(img: Rgb, quality = 90): Promise<Buffer> {
  return sharp(img.data, { raw: { width: img.width, height: img.height, channels: 3 } })
    .jpeg({ quality })
    .toBuffer();
}

function sample(img: Rgb, x: number, y: number, out: Buffer, o: number): void {
  const { width: w, height: h, data } = img;
  const cx = Math.min(w - 1, Math.max(0, x));
  const cy = Math.min(h - 1, Math.max(0, y));
  const x0 = Math.floor(cx),
    y0 = Math.floor(cy);
  const x1 = Math.min(w - 1, x0 + 1),
    y1 = Math.min(h - 1, y0 + 1);
  const fx = cx - x0,
    fy = cy - y0;
  for (let c = 0; c < 3; c++) {
    const a = data[(y0 * w + x0) * 3 + c]!,
      b = data[(y0 * w + x1) * 3 + c]!;
    const d = data[(y1 * w + x0) * 3 + c]!,
      e = data[(y1 * w + x1) * 3 + c]!;
    out[o + c] = Math.round((a * (1 - fx) + b * fx) * (1 - fy) + (d * (1 - fx) + e * fx) * fy);
  }
}

/** A small deterministic generator (mulberry32). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The face geometry the depth map is built on, from the five landmarks of the frontal photo. */
function faceFrame(l5: readonly Pt[]) {
  const [le, re, nose, lm, rm] = l5 as [Pt, Pt, Pt, Pt, Pt];
  const iod = Math.hypot(re[0] - le[0], re[1] - le[1]);
  const eye: Pt = [(le[0] + re[0]) / 2, (le[1] + re[1]) / 2];
  const mouth: Pt = [(lm[0] + rm[0]) / 2, (lm[1] + rm[1]) / 2];
  const centre: Pt = [(eye[0] + mouth[0]) / 2, (eye[1] + mouth[1]) / 2];
  return { iod, centre, nose, rx: 1.15 * iod, ry: 1.6 * iod };
}

/**
 * The largest yaw the warp can show (degrees). Rotating the depth map carries a point to
 * x' = x cos(yaw) + z sin(yaw), which stops being one-to-one where cos(yaw) + (dz/dx) sin(yaw) reaches
 * 0: the steepest slope of the dome and the nose ridge is 1.64 to 1.69 (IOD per IOD, whatever the face's
 * size; by where the nose sits between the eyes and the mouth), so beyond 30.5° to 31.4° the far side of
 * the face folds over itself (a real head hides it instead) and the view is no face at all, or one whose
 * landmarks read no turn. A turn asked beyond it (a draw of up to 32°, plus the source's own turn
 * undone) is shown at this limit. Pitch folds only beyond 37° (slope at most 1.31); no view asks that much.
 */
export const MAX_WARP_YAW_DEG = 30;

/** A view of the photo's face at another pose (see the module's comment). */
export function synthView(img: Rgb, l5: readonly Pt[], o: ViewOptions = {}): Rgb {
  const { iod, centre, nose, rx, ry } = faceFrame(l5);
  const yaw = (Math.max(-MAX_WARP_YAW_DEG, Math.min(MAX_WARP_YAW_DEG, o.yaw ?? 0)) * Math.PI) / 180;
  const pitch = ((o.pitch ?? 0) * Math.PI) / 180;
  const scale = o.scale ?? 1;
  const depth = (x: number, y: number): number => {
    const u = (x - centre[0]) / rx,
      v = (y - centre[1]) / ry;
    const r2 = u * u + v * v;
    const dome = r2 < 1 ? 0.8 * iod * (1 - r2) ** 2 : 0;
    const nx = (x - nose[0]) / (0.3 * iod),
      ny = (y - (nose[1] - 0.25 * iod)) / (0.55 * iod);
    const ridge = 0.45 * iod * Math.exp(-(nx * nx + ny * ny) / 2);
    return dome + (r2 < 1 ? ridge * (1 - r2) : 0);
  };
  const out = Buffer.alloc(img.width * img.height * 3);
  const noise = o.noiseSeed === undefined ? null : rng(o.noiseSeed);
  const gain = o.gain ?? 1;
  const sy = Math.sin(yaw),
    cyw = Math.cos(yaw),
    sp = Math.sin(pitch),
    cp = Math.cos(pitch);
  for (let py = 0; py < img.height; py++) {
    for (let px = 0; px < img.width; px++) {
      // Undo the move (scale about the face centre, shift), then the rotation by fixed-point iteration.
      const tx = centre[0] + (px + 0.5 - (o.dx ?? 0) - centre[0]) / scale;
      const ty = centre[1] + (py + 0.5 - (o.dy ?? 0) - centre[1]) / scale;
      let x = tx,
        y = ty;
      for (let k = 0; k < 6; k++) {
        const z = depth(x, y);
        // Forward: x' = c + (x - c)cos(yaw) + z sin(yaw); y' = c + (y - c)cos(pitch) - z sin(pitch).
        x = centre[0] + (tx - centre[0] - z * sy) / cyw;
        y = centre[1] + (ty - centre[1] + z * sp) / cp;
      }
      const i = (py * img.width + px) * 3;
      sample(img, x - 0.5, y - 0.5, out, i);
      if (gain !== 1 || noise) {
        for (let c = 0; c < 3; c++) {
          const n = noise ? Math.round((noise() - 0.5) * 4) : 0;
          out[i + c] = Math.max(0, Math.min(255, Math.round(out[i + c]! * gain) + n));
        }
      }
    }
  }
  return { data: out, width: img.width, height: img.height };
}

/**
 * A flat picture of the face (a print or a screen held in front of the camera) tilted about the
 * vertical or horizontal axis: a plane's perspective projection (the camera at `distance` face
 * widths), so the whole picture foreshortens and nothing stands out of it. With `print`, what such
 * a capture is known to add: a little blur, a lifted black level and a colour cast.
 */
export function flatTilt(img: Rgb, l5: readonly Pt[], o: { yaw?: number; pitch?: number; print?: boolean; noiseSeed?: number }): Rgb {
  const { iod, centre } = faceFrame(l5);
  const yaw = ((o.yaw ?? 0) * Math.PI) / 180;
  const pitch = ((o.pitch ?? 0) * Math.PI) / 180;
  const f = 6 * iod; // camera distance: a phone at arm's length from a face-sized picture
  const out = Buffer.alloc(img.width * img.height * 3);
  const noise = rng(o.noiseSeed ?? 1);
  for (let py = 0; py < img.height; py++) {
    for (let px = 0; px < img.width; px++) {
      // The ray through the output pixel meets the tilted plane at (X, Y) in the plane's own axes.
      const u = px + 0.5 - centre[0],
        v = py + 0.5 - centre[1];
      // Plane rotated by yaw about Y then pitch about X; solve the ray-plane intersection.
      const cyaw = Math.cos(yaw),
        syaw = Math.sin(yaw),
        cpt = Math.cos(pitch),
        spt = Math.sin(pitch);
      // Plane axes in camera space.
      const ax = [cyaw, 0, -syaw],
        ay = [syaw * spt, cpt, cyaw * spt];
      const nz = [syaw * cpt, -spt, cyaw * cpt];
      // Ray d = (u, v, f) from the camera at (0, 0, -f); plane through (0, 0, 0) with normal nz.
      const t = (f * nz[2]!) / (u * nz[0]! + v * nz[1]! + f * nz[2]!);
      const p = [u * t, v * t, -f + f * t];
      const X = p[0]! * ax[0]! + p[1]! * ax[1]! + p[2]! * ax[2]!;
      const Y = p[0]! * ay[0]! + p[1]! * ay[1]! + p[2]! * ay[2]!;
      const i = (py * img.width + px) * 3;
      sample(img, centre[0] + X - 0.5, centre[1] + Y - 0.5, out, i);
      if (o.print) {
        const n = (noise() - 0.5) * 6;
        out[i] = Math.min(255, Math.round(20 + out[i]! * 0.85 + 6 + n));
        out[i + 1] = Math.min(255, Math.round(20 + out[i + 1]! * 0.85 + n));
        out[i + 2] = Math.min(255, Math.round(20 + out[i + 2]! * 0.8 - 4 + n));
      }
    }
  }
  return { data: out, width: img.width, height: img.height };
}

/** The pose of each step, as the synthesised views show it (degrees). */
export const STEP_POSES: Record<string, { yaw: number; pitch: number }> = {
  center: { yaw: 0, pitch: 0 },
  turn_left: { yaw: 25, pitch: 0 },
  turn_right: { yaw: -25, pitch: 0 },
  look_up: { yaw: 0, pitch: 18 },
};
