/**
 * A frame's face as a short keyed sketch, to recognise frames sent again with new bytes (re-encoded,
 * noised, re-lit): pure functions, no I/O, shared by the service and `npm run evaluate -- liveness`.
 *
 * The face is resampled onto a 32×32 grey grid placed by its five landmarks (a similarity transform
 * onto the embedder's 112-pixel template, scaled down; each cell the mean of 4×4 bilinear samples, so
 * the face is filtered, not aliased), then centred and scaled to unit length: moving, scaling or
 * rotating the picture, and changing its brightness or contrast, leave it unchanged. The sketch is
 * the sign of its projection on `SKETCH_BITS` directions of ±1 drawn from a keyed stream (SimHash): two
 * faces whose grids make an angle θ differ in about θ/π of the bits. A frame re-encoded or noised keeps
 * its grid to within a few thousandths of cosine; another capture of the same person, even still and
 * in the same light, moves a little, blinks, and is aligned by landmarks that fall a little elsewhere.
 *
 * The sketch is compared in bands (`SKETCH_BANDS` runs of `BAND_BITS` bits): two frames are near
 * copies when at least `NEAR_COPY_BANDS` of their bands are equal. Faces of different people share few
 * (their grids' cosine on the fixture photos: median 0.16, at most 0.67), so a band's set stays small. Only keyed digests of bands are
 * stored (session-store.ts), never the grid nor the sketch. Figures: docs/face-engine.md "Frames sent
 * again with new bytes".
 */
import { createHmac } from 'node:crypto';

import { GRID } from '../../platform/face/frame-measures.js';

export { GRID };
export const SKETCH_BITS = 512;
export const BAND_BITS = 16;
export const SKETCH_BANDS = SKETCH_BITS / BAND_BITS;

/**
 * Bands (of SKETCH_BANDS) that every frame of a session must share with a frame of one earlier
 * session for the session to be a near copy. Set on the tuning half (docs/face-engine.md "Frames sent
 * again with new bytes"): new sessions synthesised from the same photos shared at most 18 (every
 * frame), re-encoded recordings 9 to 31 (median 24); 21 is the highest new session plus about one
 * standard deviation of the count (√(32·q·(1−q)) ≈ 2.8 bands).
 */
export const NEAR_COPY_BANDS = 21;

/**
 * Bands (of SKETCH_BANDS) one frame must share with one earlier frame to be its near copy, for the
 * per-frame rule of SPEC 14.1 (nearCopyFrame: one such frame fails the session). Set on real footage
 * (docs/face-engine.md "Liveness on real footage", `npm run evaluate -- liveness-footage`): the
 * frames of real re-takes (one man at one desk, another take or 10 s and more later) share at most
 * 24 bands with any earlier frame; copies of a frame (re-encoded, rescaled by 0.9, recropped by 3
 * pixels) share 18 to 32 (median 28 to 29), and every copied session has a frame sharing 30 or more.
 * 27: three bands above the re-takes, three below the least copied session.
 */
export const NEAR_COPY_FRAME_BANDS = 27;

/**
 * The least sum, over the three frames of a session that share the most bands with frames of one
 * earlier session, of those counts (`nearCopySession`): a session re-sent whole with new bytes. Set on
 * the real tuning footage (`npx tsx scripts/evaluate/near-copy-sessions.ts`, docs/face-engine.md
 * "Near copies per frame"): real re-takes (each session against every 5 s of the other clip or of its
 * own clip 10 s and more away, 673 pairs) reach at most 61; the 63 re-encoded, rescaled and recropped
 * copies of the tuning set at least 70 (their best single frame only 25 to 32, which the per-frame
 * rule at NEAR_COPY_FRAME_BANDS misses at the bottom). 66, a mean of 22 bands over the three: 5 above
 * the re-takes, 4 below the copies. Three frames average the count's noise that one frame carries.
 */
export const NEAR_COPY_SESSION_TOP3 = 66;

export { faceGrid, type RgbImage } from '../../platform/face/frame-measures.js';

/** The ±1 directions of the sketch, one bit per value of a keyed stream (HMAC-SHA256 in counter mode). */
export function sketchDirections(key: Uint8Array): Int8Array {
  const n = SKETCH_BITS * GRID * GRID;
  const out = new Int8Array(n);
  const block = Buffer.alloc(4);
  for (let c = 0, i = 0; i < n; c++) {
    block.writeUInt32BE(c);
    const bytes = createHmac('sha256', key).update('sketch-directions').update(block).digest();
    for (const b of bytes) for (let bit = 0; bit < 8 && i < n; bit++, i++) out[i] = (b >> bit) & 1 ? 1 : -1;
  }
  return out;
}

/** The sketch of a grid: SKETCH_BITS bits, the sign of each projection (bit i in byte i >> 3). */
export function sketch(grid: Float32Array, directions: Int8Array): Uint8Array {
  const out = new Uint8Array(SKETCH_BITS / 8);
  const d = GRID * GRID;
  for (let b = 0; b < SKETCH_BITS; b++) {
    let dot = 0;
    const o = b * d;
    for (let i = 0; i < d; i++) dot += directions[o + i]! * grid[i]!;
    if (dot >= 0) out[b >> 3]! |= 1 << (b & 7);
  }
  return out;
}

/** The sketch's bands, each with its index (so that equal bits in two places are different bands). */
export function sketchBands(s: Uint8Array): Buffer[] {
  const bytes = BAND_BITS / 8;
  return Array.from({ length: SKETCH_BANDS }, (_, i) => Buffer.concat([Buffer.from([i]), Buffer.from(s.subarray(i * bytes, (i + 1) * bytes))]));
}

/** Bits that differ between two sketches (for the figures). */
export function hamming(a: Uint8Array, b: Uint8Array): number {
  let n = 0;
  for (let i = 0; i < a.length; i++) {
    let x = a[i]! ^ b[i]!;
    while (x) {
      n += x & 1;
      x >>= 1;
    }
  }
  return n;
}

/** Bands equal between two sketches. */
export function equalBands(a: Uint8Array, b: Uint8Array): number {
  const bytes = BAND_BITS / 8;
  let n = 0;
  for (let i = 0; i < SKETCH_BANDS; i++)
    if (Buffer.from(a.subarray(i * bytes, (i + 1) * bytes)).equals(Buffer.from(b.subarray(i * bytes, (i + 1) * bytes)))) n++;
  return n;
}

/**
 * Whether a session's frames are near copies of frames of one earlier session: `matches[j]` holds,
 * for frame j, how many bands it shares with each earlier frame (`<session>:<frame>` → count). True
 * when one earlier session has, for every frame, a frame sharing at least `minBands` bands with it.
 * A person trying again sends new frames, so one centre frame alike is not enough: every frame,
 * turns included, must be a copy.
 */
export function nearCopyOfOneSession(matches: readonly ReadonlyMap<string, number>[], minBands = NEAR_COPY_BANDS): boolean {
  if (!matches.length) return false;
  let common: string[] | null = null;
  for (const m of matches) {
    const sessions = new Set<string>();
    for (const [frame, n] of m) if (n >= minBands) sessions.add(frame.slice(0, frame.lastIndexOf(':')));
    common = (common ?? [...sessions]).filter((s) => sessions.has(s));
    if (!common.length) return false;
  }
  return true;
}

/**
 * Whether one frame is a near copy of a frame received in an earlier session (SPEC 14.1: one such
 * frame fails the session): `matches` holds, for this frame, how many bands it shares with each
 * earlier frame (`<session>:<frame>` → count, from the keyed band digests). True when one earlier
 * frame shares at least `minBands` (NEAR_COPY_FRAME_BANDS by default).
 */
export function nearCopyFrame(matches: ReadonlyMap<string, number>, minBands = NEAR_COPY_FRAME_BANDS): boolean {
  for (const n of matches.values()) if (n >= minBands) return true;
  return false;
}

/**
 * Whether a session is a near copy of one earlier session taken as a whole: `matches[j]` holds, for
 * frame j, how many bands it shares with each earlier frame (`<session>:<frame>` → count). For each
 * earlier session, each frame's most bands shared with one of its frames; true when the three frames
 * sharing the most (fewer when the session has fewer) sum to at least `minSum`. A person's retry in
 * the same place brings a frame or two close to the last session's; a recording re-sent brings them all.
 */
export function nearCopySession(matches: readonly ReadonlyMap<string, number>[], minSum = NEAR_COPY_SESSION_TOP3): boolean {
  const best = new Map<string, number[]>();
  matches.forEach((m, j) => {
    for (const [frame, n] of m) {
      const session = frame.slice(0, frame.lastIndexOf(':'));
      const perFrame =
        best.get(session) ??
        best
          .set(
            session,
            matches.map(() => 0),
          )
          .get(session)!;
      perFrame[j] = Math.max(perFrame[j]!, n);
    }
  });
  for (const perFrame of best.values()) {
    const top = [...perFrame].sort((a, b) => b - a).slice(0, 3);
    if (top.reduce((a, b) => a + b, 0) >= minSum) return true;
  }
  return false;
}

/** Cosine of two face grids (`faceGrid`: each unit length). */
export function gridCosine(a: Float32Array, b: Float32Array): number {
  let dot = 0;
  for (let i = 0; i < a.length; i++) dot += a[i]! * b[i]!;
  return dot;
}
