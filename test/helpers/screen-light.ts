/**
 * Light frames for liveness sessions (SPEC 14.1) made from real fixture frames: a synthetic
 * reflection standing for a camera in front of a lit screen. A phone's screen at arm's length lights
 * the face it faces far more than the room behind it (the light falls off with the square of the
 * distance), so each light frame is the centre frame relit by scripts/evaluate/light-sim.ts `relight`
 * (in linear light, the face's pixels multiplied by 1 + k·colour, the background by a tenth of that)
 * with a few levels of sensor noise, so that every frame's pixels are new.
 *
 * This is not what a camera records (no auto-exposure, no specular highlights, no screen flicker): it
 * stands for the response the server must read, so that the tests of the service's flow can pass a
 * light check. How the check fares on real footage is measured by `npm run evaluate -- liveness`.
 */
import { normaliseUpload } from '../../platform/face/image.js';
import { decodeRgb, encodeJpeg, rng } from '../../scripts/evaluate/liveness-views.js';
import { addNoise, relight } from '../../scripts/evaluate/light-sim.js';
import type { FaceService } from '../../features/face/index.js';
import { hasFace } from '../../features/face/index.js';

/**
 * Screen-to-room illuminance ratio at the face of the default reflection: a phone at full brightness
 * about 30 cm from the face in an ordinary lit room.
 */
export const SCREEN_K = 0.2;

export interface LightPainting {
  /**
   * The colours the face is lit with (default: the session's `lights`): another sequence is a client
   * that does not follow the session's.
   */
  follow?: readonly string[];
  /** Strength of the reflection: 1 the default SCREEN_K, 0 no light on the face at all. */
  strength?: number;
  /** Seed of the sensor noise. */
  seed?: number;
}

/** Where the face of `frame` is ([x, y, width, height] in the normalised image), found by the real face path. */
export async function faceBox(face: FaceService, frame: Buffer): Promise<{ jpeg: Buffer; box: [number, number, number, number] }> {
  const { jpeg } = await normaliseUpload(frame);
  const a = await face.analyseCapture(jpeg, 'largest');
  if (!hasFace(a)) throw new Error(`no face in the frame to light (${a.outcome})`);
  return { jpeg, box: a.face.box };
}

/**
 * One light frame per colour of `lights` (JPEG), each `frame` lit by that colour (or by
 * `opts.follow[i]`): a camera in front of a screen showing the sequence.
 */
export async function paintLights(face: FaceService, frame: Buffer, lights: readonly string[], opts: LightPainting = {}): Promise<Buffer[]> {
  const { jpeg, box } = await faceBox(face, frame);
  const img = await decodeRgb(jpeg);
  const k = SCREEN_K * (opts.strength ?? 1);
  const random = rng(opts.seed ?? 1 + Math.floor(Math.random() * 1e9));
  return Promise.all((opts.follow ?? lights).map((colour) => encodeJpeg(addNoise(relight(img, box, colour, { k }), 2, random), 90)));
}
