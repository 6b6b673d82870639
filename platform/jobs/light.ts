/**
 * Job contract of the `light` queue: light frames of one liveness session (SPEC 14.1), in order: all of
 * them or a run of them (the API sends a session's frames as jobs of at most LIVENESS_LIGHT_JOB_FRAMES,
 * which the face processes take in parallel: features/liveness/service.ts). The frames are found cheaply: each
 * decoded (the API made them small: the console's small JPEGs as they came, any other normalised and
 * encoded small) and measured (its face's grid and colour sample, for the API's light check), the detector run on the job's first frame only (its
 * padded pass only for a face too large for the plain one) and the face then followed from frame to
 * frame by the landmark model on the previous frame's box (the detector again only where the
 * followed face is lost); no anti-spoof model, no quality. Every frame's face is aligned and embedded:
 * each must be the session's person (features/liveness/README.md "Light frames' face"). The images
 * travel as sealed Redis values, not in the job (platform/face-path/handoff.ts, kind `image`).
 */
import type { FaceErrorCode } from '../face/face-error.js';
import type { LightSample } from '../face/frame-measures.js';
import type { DetectedFace } from '../face/liveness.js';
import type { SealedEmbedding } from '../face-path/sealing.js';
import { awaitedJobContract } from './contract.js';

export const LIGHT_QUEUE = 'light' as const;

export interface LightJob {
  /**
   * Refs of the light frames in capture order, each normalised by the API (at most
   * LIGHT_FRAME_MAX_SIDE on the long side), sealed under `resultSalt` and kept in Redis until the deadline.
   */
  imageRefs: string[];
  /** Salt of the key that seals the images (with the key ring: platform/face-path/sealing.ts); lives only in the job. */
  resultSalt: string;
  /** Whether every frame's face is embedded (the API's light check needs them all). */
  embed: boolean;
  /** Salt of the key that seals the result's embeddings. */
  embedSalt: string;
}

/**
 * One light frame: its face (`tracked`: followed from the previous frame's box, not detected), or the
 * photo's outcome. `faceCount` is the detector's count on frames it ran on, null on followed ones.
 * With the face, what the light check measures on the frame's pixels, measured here where they are
 * decoded (platform/face/frame-measures.ts): the face's grid (`faceGrid`, 32×32 float32, little-endian,
 * base64) and the colour sample (`sampleLightFrame`). A job with an undecodable frame answers
 * `invalid_image` for that frame and `not_examined` for the others (the call is refused whole).
 */
export type LightFrameResult =
  | { ok: true; face: DetectedFace; tracked: boolean; faceCount: number | null; grid: string; sample: LightSample }
  | { ok: false; code: FaceErrorCode | 'not_examined'; faceCount: number };

export interface LightJobResult {
  frames: LightFrameResult[];
  /**
   * Each frame's face embedding (sealed under `embedSalt`), in the frames' order; null for a frame
   * without a face, or all null when the job was not asked to embed.
   */
  embeddings: ({ sealedEmbedding: SealedEmbedding; engineVersion: string } | null)[];
  /** The stage's own time in the worker. */
  ms: number;
}

/**
 * Longest side of a light frame as the API normalises it: what the console sends (LivenessCheck.tsx).
 * The detector (320×240 input) and the sketch need no more; the colour measure reads the room beside
 * the face, which a close face leaves few pixels of, so not less.
 */
export const LIGHT_FRAME_MAX_SIDE = 480;

export const lightContract = awaitedJobContract<typeof LIGHT_QUEUE, LightJob>(LIGHT_QUEUE);

/** LIVENESS_LIGHT_JOB_FRAMES's default: a session's 6 to 8 light frames as two jobs. */
export const DEFAULT_LIGHT_JOB_FRAMES = 4;

/**
 * How `count` light frames are cut into jobs of at most `perJob` frames, of even sizes (8 by 4: 4 + 4;
 * 7: 4 + 3; 6: 3 + 3): each job's [start, end) in the frames' order.
 */
export function lightJobRuns(count: number, perJob: number): [number, number][] {
  if (!Number.isInteger(count) || count < 0 || !Number.isInteger(perJob) || perJob < 1)
    throw new RangeError('lightJobRuns: count ≥ 0 and perJob ≥ 1, integers');
  const jobs = Math.ceil(count / perJob);
  const at = (k: number) => Math.round((k * count) / jobs);
  return Array.from({ length: jobs }, (_, k) => [at(k), at(k + 1)]);
}
