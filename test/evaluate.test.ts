/**
 * `npm run evaluate`: the statistics it prints (exact binomial bounds, the rule of three, FPIR at N),
 * the manifest and folder readers, and a whole run of the real pipeline on the project's labelled photos.
 */
import test from 'ava';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { fpirAt, lowerBound, thresholdForTargetFmr, thresholdTable, upperBound } from '../scripts/evaluate/stats.js';
import { ManifestError, pairsFromFolder, readManifest } from '../scripts/evaluate/manifest.js';
import { FIXTURES_DIR } from './fixtures/faces/labels.js';
import { decodeRgb, encodeJpeg, rng } from '../scripts/evaluate/liveness-views.js';
import { addNoise, relight } from '../scripts/evaluate/light-sim.js';
import { passiveWindows } from '../scripts/evaluate/footage-measures.js';
import type { ClipFrames, MeasuredFrame } from '../scripts/evaluate/footage.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const run = promisify(execFile);

test('zero errors in n trials: the 95 % upper bound is about 3/n (the rule of three)', (t) => {
  for (const n of [100, 3000, 1_000_000]) {
    const u = upperBound(0, n);
    // n·u tends to -ln(0.05) = 2.996 from below (2.95 at n = 100).
    t.true(u * n > 2.9 && u * n < 2.996, `n=${n}: ${u * n}`);
  }
  t.is(lowerBound(0, 100), 0);
});

test('the bounds are exact Clopper-Pearson (one-sided 95 %)', (t) => {
  // 1 error in 10: one-sided 95 % upper bound 0.3942 (= Beta(0.95; 2, 9)); lower bound 0.0051.
  t.true(Math.abs(upperBound(1, 10) - 0.3942) < 5e-4, String(upperBound(1, 10)));
  t.true(Math.abs(lowerBound(1, 10) - 0.00512) < 5e-5, String(lowerBound(1, 10)));
  // 5 in 100: upper 0.1023.
  t.true(Math.abs(upperBound(5, 100) - 0.1023) < 5e-4, String(upperBound(5, 100)));
  t.is(upperBound(10, 10), 1);
});

test('FPIR at N grows as 1 - (1 - FMR)^N, about N x FMR while small', (t) => {
  t.true(Math.abs(fpirAt(1e-8, 1_000_000) - 0.00995) < 1e-4);
  t.true(Math.abs(fpirAt(1e-6, 1_000) - 1e-3) < 1e-5);
  t.is(fpirAt(0, 1e9), 0);
  t.true(fpirAt(1e-4, 1_000_000) > 0.9999);
});

test('the table counts impostors at or above and genuines below each threshold', (t) => {
  const [row] = thresholdTable([0.5, 0.6, 0.4], [0.1, 0.45, 0.3, 0.2], [0.45], 1000);
  t.is(row!.fmr.errors, 1);
  t.is(row!.fmr.n, 4);
  t.is(row!.fnmr.errors, 1);
  t.is(row!.fnmr.n, 3);
});

test('a target FMR is claimed only when enough impostor comparisons back it', (t) => {
  const few = thresholdForTargetFmr([0.1, 0.2, 0.3], 1e-3, [0.5]);
  t.is(few.threshold, null);
  t.regex(few.reason!, /needs at least 2995/);
  // 5000 impostors, 10 of them at 0.6 and above: a 1e-3 bound needs at most ~1 error, so the threshold sits above all but ~1.
  const impostor = [...Array.from({ length: 4990 }, (_, i) => (i / 4990) * 0.5), ...Array.from({ length: 10 }, (_, i) => 0.6 + i * 0.01)];
  const ok = thresholdForTargetFmr(impostor, 1e-3, []);
  t.truthy(ok.threshold);
  const errors = impostor.filter((s) => s >= ok.threshold!).length;
  t.true(upperBound(errors, impostor.length) <= 1e-3);
  t.true(upperBound(errors + 1, impostor.length) > 1e-3 || ok.threshold! <= 0.5);
});

test('manifests: relative paths, labels and groups; a bad label is refused with its line', (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eval-'));
  writeFileSync(path.join(dir, 'm.csv'), '# comment\na,b,label,group\nx.jpg,y.jpg,same,F\n"x.jpg",z.jpg,impostor,\n');
  const pairs = readManifest(path.join(dir, 'm.csv'));
  t.deepEqual(pairs, [
    { a: path.join(dir, 'x.jpg'), b: path.join(dir, 'y.jpg'), same: true, group: 'F' },
    { a: path.join(dir, 'x.jpg'), b: path.join(dir, 'z.jpg'), same: false, group: undefined },
  ]);
  writeFileSync(path.join(dir, 'bad.csv'), 'a,b,label\nx.jpg,y.jpg,maybe\n');
  t.throws(() => readManifest(path.join(dir, 'bad.csv')), { instanceOf: ManifestError, message: /bad\.csv:2: label/ });
});

test('a folder per person makes every same and different pair; groups.csv groups people', (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eval-'));
  for (const [p, files] of [
    ['ada', ['1.jpg', '2.jpg']],
    ['bola', ['1.png']],
    ['chi', ['1.jpg']],
  ] as const) {
    mkdirSync(path.join(dir, p));
    for (const f of files) writeFileSync(path.join(dir, p, f), '');
  }
  writeFileSync(path.join(dir, 'groups.csv'), 'person,group\nada,F\nbola,F\nchi,M\n');
  const pairs = pairsFromFolder(dir);
  t.is(pairs.length, 6);
  t.is(pairs.filter((p) => p.same).length, 1);
  t.is(pairs.filter((p) => !p.same && p.group === 'F').length, 2); // ada x bola, both F
  t.is(pairs.filter((p) => !p.same && p.group === undefined).length, 3); // with chi: mixed groups
});

test('npm run evaluate on the project photos: the real pipeline separates them and says how little that proves', async (t) => {
  const { stdout } = await run(
    'node',
    ['--import', 'tsx', 'scripts/evaluate.ts', '--pairs', 'test/fixtures/faces/evaluation-pairs.csv', '--target-fmr', '1e-4'],
    {
      cwd: ROOT,
      env: { ...process.env, NODE_ENV: 'development' },
    },
  );
  const summary = JSON.parse(stdout.trim().split('\n').at(-1)!);
  t.is(summary.genuinePairs, 6);
  t.is(summary.impostorPairs, 48);
  t.true(summary.genuineMin > summary.impostorMax, 'the fixtures separate');
  t.is(summary.thresholdForTarget, null, '48 impostor pairs cannot claim an FMR of 1e-4');
  t.regex(stdout, /the target needs at least 29956/);
  t.regex(stdout, /== M: 6 same-person pairs, 22 different-person pairs/);
  const match = summary.configured.find((c: { name: string }) => c.name === 'MATCH_THRESHOLD');
  t.is(match.fmr, 0);
  t.true(Math.abs(match.fmrUpper95 - upperBound(0, 48)) < 1e-12);
});

test('an image without a face is a failure to acquire and its pairs are skipped, not scored', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eval-'));
  for (const f of ['lfw/Bush_1.png', 'lfw/Bush_2.png', 'no_face_fruits.jpg']) copyFileSync(path.join(FIXTURES_DIR, f), path.join(dir, path.basename(f)));
  writeFileSync(path.join(dir, 'm.csv'), 'a,b,label\nBush_1.png,Bush_2.png,same\nBush_1.png,no_face_fruits.jpg,different\n');
  const { stdout } = await run('node', ['--import', 'tsx', 'scripts/evaluate.ts', '--pairs', path.join(dir, 'm.csv')], {
    cwd: ROOT,
    env: { ...process.env, NODE_ENV: 'development' },
  });
  t.regex(stdout, /1 images without a usable face \(1 pairs skipped\)/);
  t.regex(stdout, /failure to acquire: .*no_face_fruits\.jpg \(no_face\)/);
  const summary = JSON.parse(stdout.trim().split('\n').at(-1)!);
  t.is(summary.genuinePairs, 1);
  t.is(summary.impostorPairs, 0);
});

/**
 * A recorded set in a temporary folder: `kind/sequence/` with its frames (fixture names) and steps;
 * with `light`, lights.txt and light frames made from a fixture frame under a simulated screen light
 * of strength `k` (0: the frame as it is, no response).
 */
async function recordedSet(
  sequences: { kind: string; name: string; steps: string; frames: string[]; light?: { lights: string[]; frame: string; k: number } }[],
): Promise<string> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'recorded-'));
  for (const s of sequences) {
    const at = path.join(dir, s.kind, s.name);
    mkdirSync(at, { recursive: true });
    if (s.steps) writeFileSync(path.join(at, 'steps.txt'), s.steps);
    s.frames.forEach((f, i) => copyFileSync(path.join(FIXTURES_DIR, 'liveness', `${f}.jpg`), path.join(at, `${i + 1}.jpg`)));
    if (s.light) {
      mkdirSync(path.join(at, 'light'));
      writeFileSync(path.join(at, 'lights.txt'), s.light.lights.join('\n'));
      const still = await decodeRgb(readFileSync(path.join(FIXTURES_DIR, 'liveness', `${s.light.frame}.jpg`)));
      const r = rng(s.light.lights.length);
      for (const [i, c] of s.light.lights.entries())
        writeFileSync(
          path.join(at, 'light', `${String(i + 1).padStart(2, '0')}.jpg`),
          await encodeJpeg(addNoise(relight(still, FIXTURE_BOX, c, { k: s.light.k }), 2, r), 90),
        );
    }
  }
  return dir;
}

// The detector's box of the tightly cropped fixture faces (bush2-center.jpg: fr_detect [6.7, 5.2, 119.3, 157.8]).
const FIXTURE_BOX: [number, number, number, number] = [6.7, 5.2, 119.3, 157.8];

test('npm run evaluate -- liveness --dir: recorded sequences judged as the service judges them, counted per kind', async (t) => {
  const dir = await recordedSet([
    { kind: 'bona_fide', name: 'bush2', steps: 'center turn_left', frames: ['bush2-center', 'bush2-turn_left', 'bush2-center2'] },
    { kind: 'print_tilted', name: 'chavez', steps: 'center,turn_left', frames: ['chavez-center', 'chavez-flat-turn_left', 'chavez-center2'] },
    { kind: 'repeated', name: 'chavez', steps: 'center\nlook_up', frames: ['chavez-jitter1', 'chavez-jitter2', 'chavez-jitter1'] },
    { kind: 'replayed', name: 'bush2-again', steps: 'center turn_right', frames: ['bush2-center', 'bush2-turn_left', 'bush2-center2'] },
  ]);
  const { stdout } = await run('node', ['--import', 'tsx', 'scripts/evaluate.ts', 'liveness', '--dir', dir, '--no-light'], {
    cwd: ROOT,
    env: { ...process.env, NODE_ENV: 'development', LIVENESS_NEAR_REPLAY_WINDOW_SECONDS: '0' },
  });
  t.regex(stdout, /bona_fide\/bush2: passed/);
  t.regex(stdout, /replayed\/bush2-again: replayed_frames/, 'the memory of frames received spans the sequences, in path order');
  t.regex(stdout, /BPCER 0\.0 % \(0\/1 bona fide sequences refused\)/);
  const summary = JSON.parse(stdout.trim().split('\n').at(-1)!);
  t.deepEqual(summary.apcer, { print_tilted: 0, repeated: 0, replayed: 0 });
  t.is(summary.bpcer.n, 1);
});

test('npm run evaluate -- liveness --dir: a set it cannot read is refused before any frame is judged, saying where', async (t) => {
  const cases: [Parameters<typeof recordedSet>[0], RegExp][] = [
    [[{ kind: 'bona_fide', name: 'a', steps: '', frames: ['bush2-center', 'bush2-turn_left', 'bush2-center2'] }], /bona_fide\/a: no steps\.txt/],
    [[{ kind: 'bona_fide', name: 'a', steps: 'turn_left center', frames: ['bush2-center', 'bush2-turn_left', 'bush2-center2'] }], /the first center/],
    [[{ kind: 'bona_fide', name: 'a', steps: 'center smile', frames: ['bush2-center', 'bush2-turn_left', 'bush2-center2'] }], /unknown step "smile"/],
    [[{ kind: 'bona_fide', name: 'a', steps: 'center turn_left', frames: ['bush2-center', 'bush2-turn_left'] }], /2 frames; a session takes 3 to 8/],
    [
      [{ kind: 'print_tilted', name: 'a', steps: 'center turn_left', frames: ['bush2-center', 'bush2-turn_left', 'bush2-center2'] }],
      /no bona_fide\/ sequences/,
    ],
  ];
  for (const [set, message] of cases) {
    const err = await t.throwsAsync<Error & { code: number; stderr: string }>(
      run('node', ['--import', 'tsx', 'scripts/evaluate.ts', 'liveness', '--dir', await recordedSet(set), '--no-light'], {
        cwd: ROOT,
        env: { ...process.env, NODE_ENV: 'development' },
      }),
    );
    t.is(err?.code, 2);
    t.regex(err?.stderr ?? '', message);
  }
});

test('npm run evaluate -- liveness --dir: the light check judges light frames; --no-light prints the chance match; --json as SPEC 14.1', async (t) => {
  const lights = ['#FF0000', '#00FFFF', '#FFFFFF', '#0000FF', '#FFFF00', '#00FF00', '#FF00FF'];
  const dir = await recordedSet([
    {
      kind: 'bona_fide',
      name: 'bush2',
      steps: 'center turn_left',
      frames: ['bush2-center', 'bush2-turn_left', 'bush2-center2'],
      light: { lights, frame: 'bush2-center', k: 0.25 },
    },
    {
      kind: 'unlit_replay',
      name: 'chavez',
      steps: 'center turn_left',
      frames: ['chavez-center', 'chavez-turn_left', 'chavez-center2'],
      light: { lights, frame: 'chavez-center', k: 0 },
    },
  ]);
  const json = path.join(dir, 'out.json');
  const env = { ...process.env, NODE_ENV: 'development', LIVENESS_NEAR_REPLAY_WINDOW_SECONDS: '0' };
  const { stdout } = await run('node', ['--import', 'tsx', 'scripts/evaluate.ts', 'liveness', '--dir', dir, '--json', json], { cwd: ROOT, env });
  t.regex(stdout, /bona_fide\/bush2: passed/);
  t.regex(stdout, /unlit_replay\/chavez: light_not_followed/);
  const written = JSON.parse(readFileSync(json, 'utf8'));
  t.like(written, { bpcer: { errors: 0, n: 1, rate: 0 }, apcer: { unlit_replay: 0 } });

  const off = await run('node', ['--import', 'tsx', 'scripts/evaluate.ts', 'liveness', '--dir', dir, '--no-light'], { cwd: ROOT, env });
  t.regex(off.stdout, /unlit_replay\/chavez: passed/, 'without the light check, the replay is not refused');
  t.regex(
    off.stdout,
    /chance match \(light frames without flashes against random sequences\): [\d.]+ % \(\d+\/40000\), 95 % upper bound [\d.]+ %; by sequence \d+\/20000, \d+\/20000; the worst (bona_fide\/bush2|unlit_replay\/chavez) /,
  );

  // Light on, a sequence without lights.txt cannot be judged.
  const bare = await recordedSet([{ kind: 'bona_fide', name: 'a', steps: 'center turn_left', frames: ['bush2-center', 'bush2-turn_left', 'bush2-center2'] }]);
  const err = await t.throwsAsync<Error & { code: number; stderr: string }>(
    run('node', ['--import', 'tsx', 'scripts/evaluate.ts', 'liveness', '--dir', bare], { cwd: ROOT, env }),
  );
  t.is(err?.code, 2);
  t.regex(err?.stderr ?? '', /bona_fide\/a: no lights\.txt/);
});

test('the passive windows of real footage are four face frames 0.4 s apart, and a frame without a face drops every window holding it', (t) => {
  // Frame i scores i / 100; frame 6 has no face. At 10 frames per second 0.4 s is 4 frames.
  const frames: MeasuredFrame[] = Array.from({ length: 20 }, (_, i) =>
    i === 6 ? { file: `${i}.jpg`, outcome: 'no_face' } : { file: `${i}.jpg`, outcome: 'face', box: [0, 0, 1, 1], landmarks5: [], livenessScore: i / 100 },
  );
  const cf: ClipFrames = { clip: { name: 'c', file: 'c.mp4', fps: 10, role: 'tune' }, dir: '.', fps: 10, frames };
  const w = passiveWindows(cf);
  t.deepEqual(w[0], [0, 0.04, 0.08, 0.12]);
  t.true(w.every((x) => x.length === 4));
  // Starts 0..7 fit in 20 frames; those whose frames include 6 (starts 2 and 6) are dropped.
  t.is(w.length, 6);
  t.false(w.some((x) => x.includes(0.06)));
  // At 2.5 frames per second 0.4 s is one frame: consecutive frames.
  t.deepEqual(passiveWindows({ ...cf, fps: 2.5 })[0], [0, 0.01, 0.02, 0.03]);
});
