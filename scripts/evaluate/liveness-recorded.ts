/**
 * `npm run evaluate -- liveness --dir DIR`: the service's judgement of liveness sessions on sequences
 * someone recorded (real people in front of the target devices, real prints, screens and injection
 * tools) instead of the views this project synthesises from still photos. The synthesised figures
 * measure the judgement's logic; only recorded sequences can set and check the thresholds for a
 * deployment (docs/face-engine.md "What these figures mean").
 *
 * The folder holds one folder per kind of sequence, `bona_fide` for people presenting themselves and
 * any other name for an attack type (`print_tilted`, `screen_replay`, `injected_reencoded`, ...), and
 * in it one folder per sequence: the frames in capture order (`.jpg`, `.jpeg` or `.png`, in the order
 * of their names, numbers compared as numbers) and `steps.txt`, the steps the session asked for
 * (`center turn_left look_up`; spaces, commas or new lines between them):
 *
 *   DIR/bona_fide/alice-1/{steps.txt, 01.jpg, 02.jpg, 03.jpg}
 *   DIR/screen_replay/alice-1-on-phone/{steps.txt, 01.jpg, ...}
 *
 * Light frames (SPEC 14.1): `lights.txt`, the colours the session asked for (`#RRGGBB`, one a line, 6
 * to 8 from LIGHT_COLOURS), and the frames captured under them, `light/01.jpg` ... in the same order;
 * the light check judges them as the service does. `--no-light` judges without it (footage recorded
 * without flashes): the light frames, when there are, are then run against random sequences instead,
 * and the run prints how often the check accepts one (chance match).
 *
 *   DIR/bona_fide/alice-1/{steps.txt, 01.jpg, 02.jpg, 03.jpg, lights.txt, light/01.jpg ... light/07.jpg}
 *
 * Sequences are judged in the order of their paths (kind, then sequence), with one memory of the
 * frames received across them, as the service keeps across sessions: a `replayed` recording must come
 * after the sequence it replays (`bona_fide` sorts before every attack type named in this project).
 * What is not judged: the timing (`implausible_timing`): a folder of frames carries no clock.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { FaceEngine } from '../../features/face/worker/pipeline/engine.js';
import { LIVENESS_STEPS, type LivenessStep } from '../../features/liveness/decision.js';
import { drawLights, judgeLightResponse, LIGHT_COLOURS } from '../../features/liveness/light-response.js';
import { judgeLight, judgeSequence, type LivenessEvaluation, type Received, type SequenceVerdict } from './liveness.js';
import { rng } from './liveness-views.js';
import { rate, type Rate } from './stats.js';

/**
 * Random light sequences drawn per recorded sequence for the chance match. At 2,000 (7 sequences:
 * 14,000) a rate near 0.05 % showed 5 to 9 acceptances, too few to put a 95 % bound under 0.1 %;
 * judging a draw costs microseconds (the frames are measured once per sequence).
 */
export const CHANCE_DRAWS = 20_000;

/** A recorded set that cannot be read as described above. */
export class RecordedSetError extends Error {}

export interface RecordedSequence {
  /** `bona_fide` or the attack type. */
  kind: string;
  name: string;
  steps: LivenessStep[];
  /** The frames' paths, in capture order. */
  files: string[];
  /** The colours of lights.txt (null: none recorded). */
  lights: string[] | null;
  /** The light frames' paths, in order. */
  lightFiles: string[];
}

export const BONA_FIDE = 'bona_fide';
const FRAME = /\.(jpe?g|png)$/i;
const KIND = /^[a-z0-9][a-z0-9_-]*$/;
const byName = (a: string, b: string) => a.localeCompare(b, 'en', { numeric: true });
const folders = (dir: string) =>
  readdirSync(dir)
    .filter((n) => !n.startsWith('.') && statSync(path.join(dir, n)).isDirectory())
    .sort(byName);

/** Reads and checks the whole set before any frame is judged. */
export function readRecordedSet(dir: string, frames: { min: number; max: number }, o: { light?: boolean } = {}): RecordedSequence[] {
  const out: RecordedSequence[] = [];
  let kinds: string[];
  try {
    kinds = folders(dir);
  } catch (e) {
    throw new RecordedSetError(`cannot read ${dir}: ${(e as Error).message}`);
  }
  for (const kind of kinds) {
    if (!KIND.test(kind)) throw new RecordedSetError(`${kind}: a kind is bona_fide or an attack type in lower case (letters, digits, _ and -)`);
    for (const name of folders(path.join(dir, kind))) {
      const at = path.join(dir, kind, name);
      const where = `${kind}/${name}`;
      let stepsText: string;
      try {
        stepsText = readFileSync(path.join(at, 'steps.txt'), 'utf8');
      } catch {
        throw new RecordedSetError(`${where}: no steps.txt (the steps the session asked for)`);
      }
      const steps = stepsText.split(/[\s,]+/).filter(Boolean);
      const unknown = steps.find((s) => !(LIVENESS_STEPS as readonly string[]).includes(s));
      if (unknown !== undefined) throw new RecordedSetError(`${where}: unknown step "${unknown}" (steps: ${LIVENESS_STEPS.join(', ')})`);
      if (steps.length < 2 || steps.length > 4 || steps[0] !== 'center')
        throw new RecordedSetError(`${where}: a session asks for 2 to 4 steps, the first center (got ${steps.join(' ') || 'none'})`);
      const files = readdirSync(at)
        .filter((n) => FRAME.test(n))
        .sort(byName)
        .map((n) => path.join(at, n));
      if (files.length < frames.min || files.length > frames.max)
        throw new RecordedSetError(`${where}: ${files.length} frames; a session takes ${frames.min} to ${frames.max}`);
      let lights: string[] | null = null;
      try {
        lights = readFileSync(path.join(at, 'lights.txt'), 'utf8').split(/\s+/).filter(Boolean);
      } catch {
        if (o.light !== false)
          throw new RecordedSetError(`${where}: no lights.txt (the colours the session asked for); footage without flashes is judged with --no-light`);
      }
      if (lights) {
        const bad = lights.find((l) => !LIGHT_COLOURS.includes(l.toUpperCase()));
        if (bad !== undefined) throw new RecordedSetError(`${where}: lights.txt: "${bad}" is not one of ${LIGHT_COLOURS.join(' ')}`);
        lights = lights.map((l) => l.toUpperCase());
      }
      let lightFiles: string[] = [];
      try {
        lightFiles = readdirSync(path.join(at, 'light'))
          .filter((n) => FRAME.test(n))
          .sort(byName)
          .map((n) => path.join(at, 'light', n));
      } catch {
        if (lights) throw new RecordedSetError(`${where}: lights.txt but no light/ folder of light frames`);
      }
      out.push({ kind, name, steps: steps as LivenessStep[], files, lights, lightFiles });
    }
  }
  if (!out.some((s) => s.kind === BONA_FIDE)) throw new RecordedSetError(`${dir}: no ${BONA_FIDE}/ sequences (BPCER needs them)`);
  return out;
}

/** Judges every recorded sequence as the service would and counts APCER per attack type and BPCER. */
export async function evaluateRecorded(
  engine: FaceEngine,
  opts: {
    dir: string;
    frames: { min: number; max: number };
    nearReplay?: boolean;
    /** false: judge without the light check (--no-light). */
    light?: boolean;
    /** Random sequences drawn per sequence for the chance match (--no-light; CHANCE_DRAWS). */
    chanceDraws?: number;
    log?: (line: string) => void;
    verbose?: boolean;
  },
): Promise<LivenessEvaluation & { chanceMatch?: Rate; chanceBySequence?: { sequence: string; accepted: number; drawn: number }[] }> {
  const sequences = readRecordedSet(opts.dir, opts.frames, { light: opts.light });
  const r = rng(20261129);
  let chanceAccepted = 0,
    chanceJudged = 0;
  // Each sequence's own count: the draws of one sequence share its frames, so the pooled bound assumes
  // more independence than there is; the worst sequence says how far one person in one room can go.
  const chanceBySequence: { sequence: string; accepted: number; drawn: number }[] = [];
  const received: Received = { digests: new Set<string>(), sketches: [], nearReplay: opts.nearReplay ?? false };
  const verdicts = new Map<string, SequenceVerdict[]>();
  const copyBands: Record<string, number[]> = {};
  for (const s of sequences) {
    const v = await judgeSequence(
      engine,
      s.files.map((f) => readFileSync(f)),
      s.steps,
      received,
      opts.light === false || !s.lights ? null : { lights: s.lights, frames: s.lightFiles.map((f) => readFileSync(f)) },
    );
    if (opts.light === false && s.lightFiles.length >= 2) {
      // Footage without flashes: how often its light frames would pass for a random sequence.
      const v = await judgeLight(engine, { lights: s.lightFiles.map(() => '#FFFFFF'), frames: s.lightFiles.map((f) => readFileSync(f)) });
      const one = { sequence: `${s.kind}/${s.name}`, accepted: 0, drawn: opts.chanceDraws ?? CHANCE_DRAWS };
      for (let d = 0; d < one.drawn; d++) {
        if (
          judgeLightResponse(
            drawLights(v.samples.length, (n) => Math.floor(r() * n)),
            v.samples,
          ).followed
        )
          one.accepted++;
      }
      chanceJudged += one.drawn;
      chanceAccepted += one.accepted;
      chanceBySequence.push(one);
    }
    const kind = s.kind === BONA_FIDE ? 'bona fide' : s.kind;
    (copyBands[kind] ??= []).push(v.copyBands ?? 0);
    if (!verdicts.has(s.kind)) verdicts.set(s.kind, []);
    verdicts.get(s.kind)!.push(v);
    opts.log?.(`  ${s.kind}/${s.name}: ${v.reason ?? 'passed'}${opts.verbose && v.detail ? ` ${v.detail}` : ''}`);
  }
  const tally = (vs: SequenceVerdict[]) => {
    const reasons: Record<string, number> = {};
    for (const v of vs) reasons[v.reason ?? 'passed'] = (reasons[v.reason ?? 'passed'] ?? 0) + 1;
    return reasons;
  };
  const bona = verdicts.get(BONA_FIDE)!;
  return {
    ...(chanceJudged ? { chanceMatch: rate(chanceAccepted, chanceJudged), chanceBySequence } : {}),
    set: 'recorded',
    nearReplay: received.nearReplay,
    copyBands,
    sources: [opts.dir],
    skippedSources: {},
    bpcer: rate(bona.filter((v) => v.status === 'failed').length, bona.length),
    bonaFideReasons: tally(bona),
    apcer: Object.fromEntries(
      [...verdicts]
        .filter(([k]) => k !== BONA_FIDE)
        .map(([k, vs]) => [k, { ...rate(vs.filter((v) => v.status === 'passed').length, vs.length), reasons: tally(vs) }]),
    ),
  };
}
