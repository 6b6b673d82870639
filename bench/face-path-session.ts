/**
 * Part of `npm run bench -- face-path`: the engine's own time, a single capture through the service and
 * a liveness session of the minimum number of frames, in ONE run, taking turns call by call (the order
 * rotates every round), so that on a shared machine the three sides see the same load and their
 * ratios mean something even when the absolute figures move.
 *
 * - engine: the raw engine in a long-lived process of its own (bench/face-path-raw-server.ts) on the
 *   session's centre frame: the upload as the API hands it on + liveness stage + embed stage, no queue, no HTTP;
 * - single capture: POST /verify/self with that frame (one client; the consumer enrolled from the
 *   full photo it was synthesised from);
 * - session: POST /liveness/sessions, then POST .../frames with the minimum number of frames
 *   (LIVENESS_MIN_FRAMES, 3) following the drawn steps (a draw of four steps, which needs four frames, is
 *   skipped and drawn again, outside the timing); then, timed apart, its use by /verify/self
 *   (`livenessSessionId`);
 * - with `lights`, a fourth side: the same session with its light sequence (6 to 8 light frames, the
 *   session's colours painted on the centre frame, at 480 px as the console sends them) on a web
 *   process of the same deployment with LIVENESS_LIGHT=required.
 *
 * Every frame is made unique (a JPEG comment with a fresh number): the service refuses frames it saw.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { ROOT, summarise } from './lib.js';

type Summary = ReturnType<typeof summarise>;

export interface AlternatedFigures {
  rounds: number;
  engine: Summary;
  engineSteps: Record<string, number>;
  single: Summary;
  /** create + frames. */
  session: Summary;
  /** The frames call alone. */
  frames: Summary;
  /**
   * A session of the minimum pose frames plus its light frames (6 to 8, painted on the centre frame at
   * 480 px as the console sends them), on a web process of the same deployment with
   * LIVENESS_LIGHT=required: create + frames, and the frames call alone. Absent without `lights`.
   */
  lit?: { session: Summary; frames: Summary };
  /** /verify/self with the passed session. */
  use: Summary;
  sessionOutcomes: Record<string, number>;
  singleOutcomes: Record<string, number>;
  /**
   * The single captures' own breakdown, means in ms: the stages' times in their workers (the response's
   * latencyMs: liveness, embed, search), its `total` (from /verify/self's first line to the comparison's
   * result), and `outside`: the wall time less `total` (the SearchLog row and the proof token written
   * after it; HTTP, the multipart body, the bearer, the route).
   */
  singleInside: Record<'liveness' | 'embed' | 'search' | 'total' | 'outside', number>;
  /** The face workers' clocks over the single captures and over the sessions alone (ms per job by step). */
  clocks: { single: string[][]; session: string[][]; lit?: string[][] };
  /**
   * CPU ms per call by process (mean; with `cpu`): the calls go one at a time, so what the service's
   * processes used between a call's start and end is that call's, whatever else loads the machine.
   * The sessions' include their use by /verify/self.
   */
  cpu?: { single: Record<string, number>; session: Record<string, number>; lit?: Record<string, number> };
}

/** A reading of the face workers' clocks and the rows of the difference between two readings. */
export interface ClockSource<C> {
  read: () => Promise<C>;
  rows: (before: C, after: C) => string[][];
  /** Adds a difference to a running total. */
  add: (total: C, before: C, after: C) => C;
  zero: () => C;
}

const LIVENESS_DIR = path.join(ROOT, 'test/fixtures/faces/liveness');
let nonce = 0;

/** A fixture frame's bytes with a fresh comment segment: same pixels, bytes never sent before. */
export function uniqueFrame(name: string | Buffer): Buffer {
  const jpeg = Buffer.isBuffer(name) ? name : readFileSync(path.join(LIVENESS_DIR, `${name}.jpg`));
  const text = Buffer.from(`bench ${++nonce} ${process.pid} ${Date.now()}`);
  const com = Buffer.concat([Buffer.from([0xff, 0xfe, 0, text.length + 2]), text]);
  return Buffer.concat([jpeg.subarray(0, 2), com, jpeg.subarray(2)]);
}

/** The raw engine process: `call()` runs the pipeline once on the photo and answers its wall ms. */
export async function rawEngine(photo: Buffer, modelsDir: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/face-path-raw-server.ts')], {
    cwd: ROOT,
    env: { ...process.env, FACE_MODELS_DIR: modelsDir },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async () => {
    const r = await lines.next();
    if (r.done) throw new Error('face-path-raw-server ended');
    return JSON.parse(r.value) as { ms: number; steps: Record<string, number> };
  };
  await next(); // ready
  let first = true;
  return {
    call: async () => {
      child.stdin!.write(`${JSON.stringify(first ? { photoB64: photo.toString('base64') } : {})}\n`);
      first = false;
      return next();
    },
    stop: () => {
      child.stdin!.end();
      child.kill('SIGTERM');
    },
  };
}

async function postForm(url: string, token: string, fields: Record<string, string>, files: { field: string; data: Buffer }[]) {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  for (const f of files) form.append(f.field, new Blob([new Uint8Array(f.data)], { type: 'image/jpeg' }), 'frame.jpg');
  const t = performance.now();
  const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
  const body = (await res.json()) as Record<string, unknown>;
  return { status: res.status, body, ms: performance.now() - t };
}

export async function benchAlternated<C>(opts: {
  webUrl: string;
  /** A consumer enrolled from the photo the `stem` frames were synthesised from. */
  userToken: string;
  /** The fixture frames' stem (test/fixtures/faces/liveness/<stem>-<step>.jpg). */
  stem: string;
  minFrames: number;
  modelsDir: string;
  rounds: number;
  warmUp?: number;
  clocks: ClockSource<C>;
  /** CPU seconds so far of the service's processes, by name (with it, `cpu` in the figures). */
  cpu?: () => Record<string, number>;
  /**
   * The session with its light sequence: a web process of the same deployment with
   * LIVENESS_LIGHT=required, and each colour's light frame (JPEG; made unique per call).
   */
  lights?: { webUrl: string; frames: ReadonlyMap<string, Buffer> };
  /** The sides to run (default all): e.g. only the engine and the single capture, for a quick A/B or a clean profile. */
  sides?: readonly ('engine' | 'single' | 'session' | 'lit')[];
}): Promise<AlternatedFigures> {
  const runs = (side: 'engine' | 'single' | 'session' | 'lit') => !opts.sides || opts.sides.includes(side);
  const { webUrl, userToken, stem } = opts;
  const centre = readFileSync(path.join(LIVENESS_DIR, `${stem}-center.jpg`));
  const raw = await rawEngine(centre, opts.modelsDir);
  const singleOutcomes: Record<string, number> = {};
  const sessionOutcomes: Record<string, number> = {};
  const engineSteps: Record<string, number> = {};
  const inside = { liveness: 0, embed: 0, search: 0, total: 0, outside: 0 };

  const engineCall = async () => {
    const r = await raw.call();
    for (const [k, v] of Object.entries(r.steps)) engineSteps[k] = (engineSteps[k] ?? 0) + v;
    return r.ms;
  };
  const singleCall = async () => {
    const r = await postForm(`${webUrl}/verify/self`, userToken, {}, [{ field: 'image', data: uniqueFrame(`${stem}-center`) }]);
    const key = r.status === 200 ? String(r.body.outcome) : `HTTP ${r.status} ${String(r.body.error)}`;
    singleOutcomes[key] = (singleOutcomes[key] ?? 0) + 1;
    const l = (r.body.latencyMs ?? {}) as Record<string, number | null>;
    for (const k of ['liveness', 'embed', 'search', 'total'] as const) inside[k] += l[k] ?? 0;
    inside.outside += r.ms - (l.total ?? 0);
    return r.ms;
  };
  /**
   * One session of the minimum frames (with `lit`, and its light frames, on the lights' web process);
   * answers create + frames, the frames call, and the use.
   */
  const sessionCall = async (lit = false): Promise<{ total: number; frames: number; use: number }> => {
    const base = lit ? opts.lights!.webUrl : webUrl;
    for (;;) {
      const t = performance.now();
      const created = await fetch(`${base}/liveness/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${userToken}`, 'content-type': 'application/json' },
        body: '{}',
      });
      const createMs = performance.now() - t;
      const body = (await created.json()) as { session: { id: string; steps: string[]; lights?: string[] } };
      if (created.status !== 201) throw new Error(`create answered ${created.status}: ${JSON.stringify(body)}`);
      const { session } = body;
      if (session.steps.length > opts.minFrames) continue; // needs more frames than the minimum
      const names = session.steps.map((s) => `${stem}-${s}`);
      if (names.length < opts.minFrames) names.push(`${stem}-center2`);
      const lightFrames = lit ? (session.lights ?? []).map((c) => ({ field: 'lightFrames', data: uniqueFrame(opts.lights!.frames.get(c)!) })) : [];
      const f = await postForm(`${base}/liveness/sessions/${session.id}/frames`, userToken, {}, [
        ...names.map((n) => ({ field: 'frames', data: uniqueFrame(n) })),
        ...lightFrames,
      ]);
      const s = f.body.session as { status: string; reason?: string } | undefined;
      const key = `${lit ? 'with lights ' : ''}${f.status === 200 ? `${s!.status}${s!.reason ? ` ${s!.reason}` : ''}` : `HTTP ${f.status} ${String(f.body.error)}`}`;
      sessionOutcomes[key] = (sessionOutcomes[key] ?? 0) + 1;
      if (s?.status !== 'passed') throw new Error(`a bona fide session of the bench did not pass: ${key}`);
      const use = (await postForm(`${base}/verify/self`, userToken, { livenessSessionId: session.id }, [])).ms;
      return { total: createMs + f.ms, frames: f.ms, use };
    }
  };

  try {
    for (let i = 0; i < (opts.warmUp ?? 5); i++) {
      if (runs('engine')) await engineCall();
      if (runs('single')) await singleCall();
      if (runs('session')) await sessionCall();
      if (opts.lights && runs('lit')) await sessionCall(true);
    }
    for (const k of Object.keys(engineSteps)) delete engineSteps[k];
    for (const o of [singleOutcomes, sessionOutcomes]) for (const k of Object.keys(o)) delete o[k];
    for (const k of Object.keys(inside) as (keyof typeof inside)[]) inside[k] = 0;
    const engine: number[] = [];
    const single: number[] = [];
    const session: number[] = [];
    const frames: number[] = [];
    const use: number[] = [];
    const litSession: number[] = [];
    const litFrames: number[] = [];
    const { clocks } = opts;
    let singleClocks = clocks.zero();
    let sessionClocks = clocks.zero();
    let litClocks = clocks.zero();
    const cpuSum: Record<'single' | 'session' | 'lit', Record<string, number>> = { single: {}, session: {}, lit: {} };
    const cpuOf = async <T>(side: keyof typeof cpuSum, f: () => Promise<T>): Promise<T> => {
      if (!opts.cpu) return f();
      const c0 = opts.cpu();
      const r = await f();
      const c1 = opts.cpu();
      for (const k of Object.keys(c1)) cpuSum[side][k] = (cpuSum[side][k] ?? 0) + 1000 * (c1[k]! - (c0[k] ?? 0));
      return r;
    };
    const cpuMeans = (side: keyof typeof cpuSum) => Object.fromEntries(Object.entries(cpuSum[side]).map(([k, v]) => [k, v / opts.rounds]));
    const sides = [
      ...(runs('engine') ? [async () => engine.push(await engineCall())] : []),
      ...(runs('single')
        ? [
            async () => {
              const c0 = await clocks.read();
              single.push(await cpuOf('single', singleCall));
              singleClocks = clocks.add(singleClocks, c0, await clocks.read());
            },
          ]
        : []),
      ...(runs('session')
        ? [
            async () => {
              const c0 = await clocks.read();
              const r = await cpuOf('session', () => sessionCall());
              sessionClocks = clocks.add(sessionClocks, c0, await clocks.read());
              session.push(r.total);
              frames.push(r.frames);
              use.push(r.use);
            },
          ]
        : []),
      ...(opts.lights && runs('lit')
        ? [
            async () => {
              const c0 = await clocks.read();
              const r = await cpuOf('lit', () => sessionCall(true));
              litClocks = clocks.add(litClocks, c0, await clocks.read());
              litSession.push(r.total);
              litFrames.push(r.frames);
            },
          ]
        : []),
    ];
    for (let round = 0; round < opts.rounds; round++) {
      // The order rotates: no side always follows the same one.
      for (let k = 0; k < sides.length; k++) await sides[(round + k) % sides.length]!();
    }
    for (const k of Object.keys(engineSteps)) engineSteps[k] = engineSteps[k]! / opts.rounds;
    return {
      rounds: opts.rounds,
      engine: summarise(engine),
      engineSteps,
      single: summarise(single),
      session: summarise(session),
      frames: summarise(frames),
      use: summarise(use),
      ...(opts.lights ? { lit: { session: summarise(litSession), frames: summarise(litFrames) } } : {}),
      sessionOutcomes,
      singleOutcomes,
      singleInside: Object.fromEntries(Object.entries(inside).map(([k, v]) => [k, v / opts.rounds])) as AlternatedFigures['singleInside'],
      clocks: {
        single: clocks.rows(clocks.zero(), singleClocks),
        session: clocks.rows(clocks.zero(), sessionClocks),
        ...(opts.lights ? { lit: clocks.rows(clocks.zero(), litClocks) } : {}),
      },
      ...(opts.cpu ? { cpu: { single: cpuMeans('single'), session: cpuMeans('session'), ...(opts.lights ? { lit: cpuMeans('lit') } : {}) } } : {}),
    };
  } finally {
    raw.stop();
  }
}
