/**
 * Capture quality against controlled degradations of the fixture photos: per degradation and level,
 * the genuine match score (the degraded probe against the person's other, undegraded photos) and
 * the quality score and issues of the degraded probe. Shows where matching breaks and whether the
 * quality assessment warns first. The table is in docs/face-engine.md ("Capture quality").
 *
 *   npx tsx scripts/quality-degradations.ts            # Markdown tables
 *   npx tsx scripts/quality-degradations.ts --json f   # also every figure as JSON
 *   npx tsx scripts/quality-degradations.ts --measures # raw measures of the undegraded fixtures
 *
 * The degradations are made with sharp from the original fixture files; test/face/face-quality.test.ts
 * uses the same functions. Levels are relative to the face, so that one level means the same on a
 * 126 px LFW tile and on a 1920 px group photo: blur sigma and crop in units of the face, downscaling
 * to a target inter-eye distance.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { FaceEngine } from '../features/face/worker/pipeline/engine.js';
import { config } from '../processes/config.js';
import { normaliseUpload } from '../platform/face/image.js';
import { isFaceError } from '../platform/face/face-error.js';
import { cosine } from '../platform/face/embeddings.js';
import { ARCFACE_TEMPLATE_112 } from '../features/face/worker/pipeline/align.js';
import { CALIBRATED_THRESHOLDS } from '../platform/thresholds.js';
import type { QualityAssessment, QualityIssue } from '../platform/face/quality.js';

export const ROOT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ROOT = ROOT_DIR;
export const FIXTURES_DIR = path.join(ROOT, 'test/fixtures/faces');
export const fixture = (rel: string) => readFileSync(path.join(FIXTURES_DIR, rel));

/** Inter-eye distance of the ArcFace 112x112 template: one "aligned pixel" is IED / 35.24. */
export const TEMPLATE_IED = ARCFACE_TEMPLATE_112[1]![0] - ARCFACE_TEMPLATE_112[0]![0];

/** Where the face is in the ORIGINAL file's pixels (from the undegraded photo's liveness stage). */
export interface FaceGeometry {
  width: number;
  height: number;
  /** Detector box [x, y, w, h], clipped to the image. */
  box: [number, number, number, number];
  eyes: [[number, number], [number, number]];
  ied: number;
}

export interface Degradation {
  kind: string;
  /** The issue this degradation should raise from some level on. */
  issue: QualityIssue;
  /** What a level means. */
  unit: string;
  /** Increasing severity. */
  levels: number[];
  apply(original: Buffer, g: FaceGeometry, level: number): Promise<Buffer>;
}

const png = (s: ReturnType<typeof sharp>) => s.png().toBuffer();

export const DEGRADATIONS: Degradation[] = [
  {
    kind: 'gaussian blur',
    issue: 'blurred',
    unit: 'sigma in aligned-face pixels (1 = IED / 35.2)',
    levels: [0.5, 1, 1.5, 2, 3, 4],
    apply: (buf, g, s) => png(sharp(buf).blur(Math.max(0.3, (s * g.ied) / TEMPLATE_IED))),
  },
  {
    kind: 'darkening',
    issue: 'too_dark',
    unit: 'gain on every pixel',
    levels: [0.7, 0.5, 0.35, 0.25, 0.18, 0.12, 0.08],
    apply: (buf, _g, k) => png(sharp(buf).linear(k, 0)),
  },
  {
    kind: 'over-exposure',
    issue: 'too_bright',
    unit: 'gain on every pixel (clipped at 255)',
    levels: [1.3, 1.6, 2, 2.5, 3, 4],
    apply: (buf, _g, k) => png(sharp(buf).linear(k, 0)),
  },
  {
    kind: 'downscaling',
    issue: 'face_too_small',
    unit: 'inter-eye distance after scaling, px',
    levels: [40, 30, 24, 20, 16, 12, 9],
    apply: async (buf, g, ied) => {
      const f = Math.min(1, ied / g.ied);
      return png(sharp(buf).resize({ width: Math.max(8, Math.round(g.width * f)), height: Math.max(8, Math.round(g.height * f)), fit: 'fill' }));
    },
  },
  {
    kind: 'crop cutting the face',
    issue: 'face_cut_off',
    unit: 'share of the face box cut away on the left',
    levels: [0.1, 0.2, 0.3, 0.4, 0.5],
    apply: (buf, g, share) => {
      const left = Math.max(0, Math.round(g.box[0] + share * g.box[2]));
      return png(sharp(buf).extract({ left, top: 0, width: g.width - left, height: g.height }));
    },
  },
  {
    kind: 'in-plane rotation',
    issue: 'not_frontal',
    unit: 'degrees',
    levels: [10, 15, 20, 25, 30, 45, 60, 90],
    apply: (buf, _g, deg) => png(sharp(buf).rotate(deg, { background: { r: 128, g: 128, b: 128 } })),
  },
  {
    kind: 'eyes covered (dark band)',
    issue: 'eyes_not_visible',
    unit: 'band height / inter-eye distance',
    levels: [0.15, 0.25, 0.35, 0.5],
    apply: (buf, g, h) => {
      const [l, r] = g.eyes;
      const x = Math.round(l[0] - 0.45 * g.ied),
        w = Math.round(r[0] - l[0] + 0.9 * g.ied);
      const cy = (l[1] + r[1]) / 2,
        hh = Math.max(2, Math.round(h * g.ied));
      const svg = `<svg width="${g.width}" height="${g.height}"><rect x="${x}" y="${Math.round(cy - hh / 2)}" width="${w}" height="${hh}" fill="#101010"/></svg>`;
      return png(sharp(buf).composite([{ input: Buffer.from(svg), top: 0, left: 0 }]));
    },
  },
];

/** Probes with a genuine mate: each degraded probe is compared with the undegraded mates. */
export const GENUINE_PROBES: Array<{ probe: string; mates: string[] }> = [
  { probe: 'lfw/Bush_1.png', mates: ['lfw/Bush_2.png', 'lfw/Bush_3.png'] },
  { probe: 'lfw/Bush_2.png', mates: ['lfw/Bush_1.png', 'lfw/Bush_3.png'] },
  { probe: 'lfw/Bush_3.png', mates: ['lfw/Bush_1.png', 'lfw/Bush_2.png'] },
  { probe: 'lfw/Powell_1.png', mates: ['lfw/Powell_2.png', 'lfw/Powell_3.png'] },
  { probe: 'lfw/Powell_2.png', mates: ['lfw/Powell_1.png', 'lfw/Powell_3.png'] },
  { probe: 'lfw/Powell_3.png', mates: ['lfw/Powell_1.png', 'lfw/Powell_2.png'] },
  { probe: 'grace_hopper_a.jpg', mates: ['grace_hopper_b.jpg'] },
  { probe: 'grace_hopper_b.jpg', mates: ['grace_hopper_a.jpg'] },
];

/** Every single-face fixture photo (and the group photos' largest face): no issue when undegraded. */
export const CLEAN_PHOTOS = [
  'lfw/Bush_1.png',
  'lfw/Bush_2.png',
  'lfw/Bush_3.png',
  'lfw/Chavez_1.png',
  'lfw/Powell_1.png',
  'lfw/Powell_2.png',
  'lfw/Powell_3.png',
  'lfw/Sharon_1.png',
  'grace_hopper_a.jpg',
  'grace_hopper_b.jpg',
  'astronaut.png',
  'group/sample1.jpg',
  'group/sample2.jpg',
  'group/sample3.jpg',
];

export interface Analysed {
  quality: QualityAssessment;
  embedding: number[];
  livenessScore: number;
}

/** Normalise, liveness stage ('largest', with quality), embed; null when no face is found. */
export async function analyse(engine: FaceEngine, upload: Buffer): Promise<Analysed | null> {
  const n = await normaliseUpload(upload);
  try {
    const live = await engine.liveness(n.jpeg, 'largest');
    const { embedding } = await engine.embed(n.jpeg, live.face.landmarks5);
    return { quality: live.quality!, embedding, livenessScore: live.livenessScore };
  } catch (e) {
    if (isFaceError(e) && e.code === 'no_face') return null;
    throw e;
  }
}

/** The face's geometry in the original file's pixels. */
export async function geometry(engine: FaceEngine, original: Buffer): Promise<FaceGeometry> {
  const meta = await sharp(original).metadata();
  const n = await normaliseUpload(original);
  const live = await engine.liveness(n.jpeg, 'largest');
  const k = meta.width! / n.width;
  const [l, r] = live.face.landmarks5 as [[number, number], [number, number]];
  const eyes: FaceGeometry['eyes'] = [
    [l[0] * k, l[1] * k],
    [r[0] * k, r[1] * k],
  ];
  return {
    width: meta.width!,
    height: meta.height!,
    box: live.face.box.map((v) => v * k) as FaceGeometry['box'],
    eyes,
    ied: Math.hypot(eyes[1][0] - eyes[0][0], eyes[1][1] - eyes[0][1]),
  };
}

export interface LevelRow {
  kind: string;
  issue: QualityIssue;
  level: number;
  probes: number;
  noFace: number;
  /** Genuine scores of the degraded probes against their undegraded mates. */
  genuineMin: number | null;
  genuineMedian: number | null;
  /** Genuine pairs still at or above MATCH_THRESHOLD (of `pairs`). */
  matched: number;
  pairs: number;
  qualityMedian: number | null;
  /** Probes (with a face) on which this degradation's issue is raised. */
  flagged: number;
}

const median = (xs: number[]) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

export async function degradationTable(engine: FaceEngine): Promise<LevelRow[]> {
  const clean = new Map<string, Analysed>();
  for (const f of new Set(GENUINE_PROBES.flatMap((p) => [p.probe, ...p.mates]))) {
    const a = await analyse(engine, fixture(f));
    if (!a) throw new Error(`no face in fixture ${f}`);
    clean.set(f, a);
  }
  const geo = new Map<string, FaceGeometry>();
  for (const { probe } of GENUINE_PROBES) geo.set(probe, await geometry(engine, fixture(probe)));

  const rows: LevelRow[] = [];
  for (const d of DEGRADATIONS) {
    for (const level of [0, ...d.levels]) {
      const genuine: number[] = [];
      const qualities: number[] = [];
      let noFace = 0,
        flagged = 0,
        pairs = 0;
      for (const { probe, mates } of GENUINE_PROBES) {
        const upload = level === 0 ? fixture(probe) : await d.apply(fixture(probe), geo.get(probe)!, level);
        const a = level === 0 ? clean.get(probe)! : await analyse(engine, upload);
        pairs += mates.length;
        if (!a) {
          noFace++;
          continue;
        }
        qualities.push(a.quality.score);
        if (a.quality.issues.includes(d.issue)) flagged++;
        for (const m of mates) genuine.push(cosine(a.embedding, clean.get(m)!.embedding));
      }
      rows.push({
        kind: d.kind,
        issue: d.issue,
        level,
        probes: GENUINE_PROBES.length,
        noFace,
        genuineMin: genuine.length ? Math.min(...genuine) : null,
        genuineMedian: median(genuine),
        matched: genuine.filter((s) => s >= CALIBRATED_THRESHOLDS.match).length,
        pairs,
        qualityMedian: median(qualities),
        flagged,
      });
    }
  }
  return rows;
}

const f2 = (v: number | null) => (v === null ? '–' : v.toFixed(2));

export function renderTable(rows: LevelRow[]): string {
  const out: string[] = [];
  for (const d of DEGRADATIONS) {
    out.push(`**${d.kind}** (level: ${d.unit}; issue \`${d.issue}\`)`, '');
    out.push('| level | genuine score median (min) | genuine pairs matching | quality score median | probes flagged | no face |');
    out.push('|---|---|---|---|---|---|');
    for (const r of rows.filter((x) => x.kind === d.kind)) {
      out.push(
        `| ${r.level === 0 ? 'none' : r.level} | ${f2(r.genuineMedian)} (${f2(r.genuineMin)}) | ${r.matched}/${r.pairs} | ${r.qualityMedian ?? '–'} | ${r.flagged}/${r.probes - r.noFace} | ${r.noFace} |`,
      );
    }
    out.push('');
  }
  return out.join('\n');
}

async function main() {
  const args = process.argv.slice(2);
  const engine = await FaceEngine.load(path.resolve(ROOT, config().face.modelsDir));
  try {
    if (args.includes('--measures')) {
      for (const f of CLEAN_PHOTOS) {
        const a = await analyse(engine, fixture(f));
        console.log(f.padEnd(20), a ? JSON.stringify({ score: a.quality.score, issues: a.quality.issues, ...a.quality.measures }) : 'no face');
      }
      return;
    }
    const rows = await degradationTable(engine);
    console.log(renderTable(rows));
    const j = args.indexOf('--json');
    if (j >= 0 && args[j + 1]) writeFileSync(args[j + 1]!, JSON.stringify(rows, null, 2));
  } finally {
    await engine.release();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
