/**
 * No change in any outcome: every fixture photo, through the API's face service, the real queues and
 * the real face worker, gives the same outcome, face count and scores (within 0.001) as the values
 * recorded from the code before the face-path performance work changed anything
 * (test/fixtures/faces/recorded-outcomes.json).
 *
 * Recorded values: per photo and face mode, the liveness stage's result (outcome, faceCount,
 * detector score, liveness score, box, five points) and the embedding. Compared: outcome, faceCount,
 * the liveness decision and score, the detector score, and every pairwise cosine between the photos'
 * embeddings (the scores 1:1 and 1:N decisions are made of) plus each embedding against its recorded
 * self. Tolerance 0.001 on every score.
 *
 * Re-record only on purpose (a new engine version): RECORD_FACE_OUTCOMES=1 npx ava test/face/face-outcomes.test.ts
 */
import test from 'ava';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { hasFace } from '../../features/face/face-service.js';
import { startHarness, ROOT, type Harness } from '../helpers/harness.js';

const FIXTURES = path.join(ROOT, 'test/fixtures/faces');
const RECORDED = path.join(FIXTURES, 'recorded-outcomes.json');
const TOLERANCE = 0.001;

interface Recorded {
  outcome: string;
  faceCount: number;
  livenessScore: number | null;
  detScore: number | null;
  box: number[] | null;
  landmarks5: number[][] | null;
  embedding: number[] | null;
}

type RecordedFile = Record<string, Record<'single' | 'largest', Recorded>>;

function photos(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(path.join(FIXTURES, dir), { withFileTypes: true })) {
      const rel = path.join(dir, e.name);
      // liveness/ holds frames synthesised from these photos for the liveness tests (test/liveness/liveness.test.ts),
      // not photos of their own: their outcomes are that suite's to check.
      if (e.isDirectory()) {
        if (rel !== 'liveness') walk(rel);
      } else if (/\.(jpe?g|png|webp)$/i.test(e.name)) out.push(rel);
    }
  };
  walk('');
  return out.sort();
}

const dot = (a: number[], b: number[]) => a.reduce((s, v, i) => s + v * b[i]!, 0);

let h: Harness;
test.before(async () => {
  h = await startHarness({ face: true });
});
test.after.always(async () => {
  await h?.stop();
});

async function run(file: string, mode: 'single' | 'largest'): Promise<Recorded> {
  // Every face is embedded here, also one below the liveness threshold (its aligned face is kept: 0).
  const a = await h.deps.face.analyseCapture(readFileSync(path.join(FIXTURES, file)), mode, undefined, 0);
  if (!hasFace(a)) return { outcome: a.outcome, faceCount: a.faceCount, livenessScore: null, detScore: null, box: null, landmarks5: null, embedding: null };
  const e = await h.deps.face.embedCapture(a);
  return {
    outcome: a.outcome,
    faceCount: a.faceCount,
    livenessScore: a.livenessScore,
    detScore: a.face.detScore,
    box: a.face.box,
    landmarks5: a.face.landmarks5,
    embedding: e.embedding.map((v) => Math.round(v * 1e7) / 1e7),
  };
}

test('every fixture photo gives the recorded outcome and scores (within 0.001)', async (t) => {
  const now: RecordedFile = {};
  for (const file of photos()) now[file] = { single: await run(file, 'single'), largest: await run(file, 'largest') };
  if (process.env.RECORD_FACE_OUTCOMES === '1') {
    writeFileSync(RECORDED, `${JSON.stringify(now)}\n`);
    t.log(`recorded ${Object.keys(now).length} photos into ${RECORDED}`);
    t.pass();
    return;
  }
  const was = JSON.parse(readFileSync(RECORDED, 'utf8')) as RecordedFile;
  t.deepEqual(Object.keys(now).sort(), Object.keys(was).sort(), 'the same fixture photos');
  const threshold = h.config.face.livenessThreshold;
  const embedded: { key: string; was: number[]; now: number[] }[] = [];
  for (const file of Object.keys(was)) {
    for (const mode of ['single', 'largest'] as const) {
      const w = was[file]![mode],
        n = now[file]![mode];
      const key = `${file} (${mode})`;
      t.is(n.outcome, w.outcome, `${key}: outcome`);
      t.is(n.faceCount, w.faceCount, `${key}: faceCount`);
      if (w.livenessScore === null) {
        t.is(n.livenessScore, null, `${key}: no face`);
        continue;
      }
      t.true(Math.abs(n.livenessScore! - w.livenessScore) <= TOLERANCE, `${key}: liveness ${n.livenessScore} vs ${w.livenessScore}`);
      t.is(n.livenessScore! >= threshold, w.livenessScore >= threshold, `${key}: liveness decision`);
      t.true(Math.abs(n.detScore! - w.detScore!) <= TOLERANCE, `${key}: detector score ${n.detScore} vs ${w.detScore}`);
      embedded.push({ key, was: w.embedding!, now: n.embedding! });
    }
  }
  t.true(embedded.length >= 20, `${embedded.length} embeddings compared`);
  let worst = 0;
  for (let i = 0; i < embedded.length; i++) {
    const self = dot(embedded[i]!.now, embedded[i]!.was);
    t.true(self >= 1 - TOLERANCE, `${embedded[i]!.key}: cosine with its recorded embedding ${self}`);
    for (let j = i + 1; j < embedded.length; j++) {
      const d = Math.abs(dot(embedded[i]!.now, embedded[j]!.now) - dot(embedded[i]!.was, embedded[j]!.was));
      worst = Math.max(worst, d);
      t.true(d <= TOLERANCE, `${embedded[i]!.key} ~ ${embedded[j]!.key}: score moved by ${d}`);
    }
  }
  t.log(`largest pairwise score change: ${worst.toExponential(2)} over ${embedded.length} embeddings`);
});

test('the events streams keep 1,000 events: results travel on reply lists and never enter them', async (t) => {
  await h.deps.face.analyseCapture(readFileSync(path.join(FIXTURES, 'lfw/Bush_1.png')), 'single');
  const meta = (queue: string) => h.deps.redis.hget(`${h.config.redis.prefix}:bull:${queue}:meta`, 'opts.maxLenEvents');
  t.is(await meta('liveness'), '1000');
  t.is(await meta('embed'), '1000');
});
