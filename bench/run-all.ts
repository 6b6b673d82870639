/**
 * The benchmarks (docs/performance.md has the figures and the commands):
 *
 *   npm run bench                      # all, in this order
 *   npm run bench -- stages            # per-stage latency and pipeline throughput (real models, fixture photos)
 *   npm run bench -- search            # 1:N search at 1M, both generators (BENCH_N=100000 for a quick run; --dataset DIR)
 *   npm run bench -- search-shards     # BENCH_SHARDS (4) shards beside the single index, real processes (also: BENCH_SHARDS=4 npm run bench -- search)
 *   npm run bench -- identify-e2e      # identify through the queues + SearchLog vs the raw engine
 *   npm run bench -- dedupe            # the search a link adds for duplicate detection, at 1M (BENCH_N)
 *   npm run bench -- face-path         # /verify/self and /identify vs the raw engine, one client and 4 in flight; a liveness session
 *   npm run bench -- face-contention   # the face pipeline alone, two processes at once, 2 intra-op threads
 *   npm run bench -- floor             # the committed architecture with no face work, against the engine
 *
 * Each prints Markdown tables and writes its figures to var/bench/<name>.json. Run them on an idle
 * machine: they measure CPU time, and the search benchmark needs about 6 GB of RAM at 1M.
 */
import { fmt } from './lib.js';

// A benchmark returns its Markdown, or that plus a line to print LAST (the search bench's JSON figures).
const BENCHES: Record<string, () => Promise<string | { markdown: string; lastLine: string }>> = {
  stages: async () => (await import('./stages.js')).runStagesBench(),
  // BENCH_SHARDS=N: the sharded run beside the single index (bench/search-shards.ts) instead.
  search: async () =>
    Number(process.env.BENCH_SHARDS ?? 0) > 1 ? (await import('./search-shards.js')).runSearchShardsBench() : (await import('./search.js')).runSearchBench(),
  'search-shards': async () => (await import('./search-shards.js')).runSearchShardsBench(),
  'identify-e2e': async () => (await import('./identify-e2e.js')).runIdentifyE2eBench(),
  'face-path': async () => (await import('./face-path.js')).runFacePathBench(),
  'face-contention': async () => (await import('./face-contention.js')).runFaceContentionBench(),
  dedupe: async () => (await import('./dedupe.js')).runDedupeBench(),
  floor: async () => (await import('./architecture-floor.js')).runArchitectureFloorBench(),
};

// Options with a value (`--dataset DIR`) are the benchmarks' own: skip them and their value.
const argv = process.argv.slice(2);
const asked = argv.filter((a, i) => !a.startsWith('-') && argv[i - 1] !== '--dataset');
const unknown = asked.filter((n) => !(n in BENCHES));
if (unknown.length) {
  console.error(`unknown benchmark(s): ${unknown.join(', ')}; choose from ${Object.keys(BENCHES).join(', ')}`);
  process.exit(2);
}
const names = asked.length ? asked : Object.keys(BENCHES);
const started = Date.now();
const sections: string[] = [];
const lastLines: string[] = [];
for (const name of names) {
  console.log(`\n#### bench: ${name}`);
  const r = await BENCHES[name]!();
  sections.push(`## ${name}\n\n${typeof r === 'string' ? r : r.markdown}`);
  if (typeof r !== 'string') lastLines.push(r.lastLine);
}
console.log(`\n\n======== summary (${fmt((Date.now() - started) / 1000)} s) ========\n\n${sections.join('\n\n')}`);
for (const line of lastLines) console.log(line);
process.exit(0);
