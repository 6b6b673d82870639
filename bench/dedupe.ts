/**
 * The link's own cost of duplicate detection (docs/dedupe.md, docs/performance.md): at N enrolled
 * (BENCH_N, default 1,000,000 synthetic identities of bench/lib.ts), the search a link adds, on the
 * engine the search replicas serve by default (VECTOR_INDEX_FACTORY, BinarySketch512, with the
 * default SEARCH_RERANK_CANDIDATES / SEARCH_EXACT_CANDIDATES):
 *
 *   - `knn k=5`: /identify's search, for comparison;
 *   - `dedupe k=5 excluding the user`: the link's search, one more candidate asked for and the linking
 *     user's own row dropped (the user's NIN embedding is in the index when the BVN is linked);
 *   - `watch-list screen`: BENCH_WATCHLIST (default 1,000) templates compared in the web process, as
 *     kept decrypted between list changes, and as decrypted from their sealed blobs after a change.
 *
 * The probe of identity i is a second vector at cosine 0.6 with enrolled row i (a genuine mate), and
 * the excluded user is that same identity: the hardest case for the exclusion, whose best hit is the
 * user's own row. The queue hop the search job adds is measured by `npm run bench -- identify-e2e`.
 *
 *   npm run bench -- dedupe                 # BENCH_N=100000 for a quick run
 */
import { performance } from 'node:perf_hooks';
import { loadConfig } from '../processes/config.js';
import { keyRingOf } from '../platform/keys/templates.js';
import { cosine, decodeEmbedding, encodeEmbedding } from '../platform/face/embeddings.js';
import { engineKindFor } from '../features/search/worker/replica.js';
import type { EngineRow } from '../features/search/worker/engine.js';
import { DIM, enrolledVector, fmt, machine, probeVector, queriedIdentities, saveResults, summarise, syntheticUserId, table } from './lib.js';

export async function runDedupeBench(): Promise<string> {
  const env = process.env;
  const n = Number(env.BENCH_N ?? 1_000_000);
  const q = Number(env.BENCH_PROBES ?? 200);
  const w = Number(env.BENCH_WATCHLIST ?? 1000);
  const config = loadConfig({ ...env, NODE_ENV: 'development' });
  const kind = engineKindFor(config.search.indexFactory, {
    nprobe: config.search.indexNprobe,
    rerankCandidates: config.search.rerankCandidates,
    exactCandidates: config.search.exactCandidates,
    dim: DIM,
  });

  const t0 = performance.now();
  const sampleSize = Math.min(n, kind.sampleSize || 20_000);
  const sample: EngineRow[] = Array.from({ length: sampleSize }, (_, j) => {
    const i = Math.floor((j * n) / sampleSize);
    return { userId: syntheticUserId(i), vector: enrolledVector(i) };
  });
  const builder = kind.startBuild(sample, null, n);
  const CHUNK = 20_000;
  for (let first = 0; first < n; first += CHUNK) {
    const rows: EngineRow[] = [];
    for (let i = first; i < Math.min(n, first + CHUNK); i++) rows.push({ userId: syntheticUserId(i), vector: enrolledVector(i) });
    builder.add(rows);
  }
  const built = await builder.finish();
  if (!built.engine) throw new Error('the engine build returned no engine');
  const engine = built.engine;
  const buildS = (performance.now() - t0) / 1000;
  console.log(`dedupe bench: ${engine.size} enrolled (${engine.effectiveFactory}) in ${fmt(buildS)} s`);

  const ids = queriedIdentities(n, q);
  const probes = ids.map((i) => probeVector(i));
  const knn: number[] = [];
  const dedupe: number[] = [];
  let ownFirst = 0;
  let othersAbove = 0;
  for (let j = 0; j < ids.length; j++) {
    const probe = probes[j]!;
    const own = syntheticUserId(ids[j]!);
    let t = performance.now();
    engine.searchMany([probe], 5);
    knn.push(performance.now() - t);
    t = performance.now();
    const hits = engine
      .searchMany([probe], 6)[0]!
      .filter((h) => h.userId !== own)
      .slice(0, 5);
    dedupe.push(performance.now() - t);
    if (engine.searchMany([probe], 1)[0]![0]?.userId === own) ownFirst++;
    if (hits.some((h) => h.score >= config.dedupe.reviewThreshold)) othersAbove++;
  }

  // The watch-list: sealed templates, decrypted and compared on every link.
  const ring = keyRingOf(config);
  const sealed = Array.from({ length: w }, (_, i) => ({
    id: `watch-${i}`,
    blob: ring.seal('templates', encodeEmbedding(enrolledVector(n + i)), `watchlist:watch-${i}`),
  }));
  const cold: number[] = [];
  const warm: number[] = [];
  const templates = sealed.map((x) => ({ id: x.id, vector: decodeEmbedding(ring.open('templates', x.blob, `watchlist:${x.id}`)) }));
  let best = -1;
  for (const probe of probes) {
    // After a change of the list: every template decrypted, then compared.
    let t = performance.now();
    for (const x of sealed) best = Math.max(best, cosine(probe, decodeEmbedding(ring.open('templates', x.blob, `watchlist:${x.id}`))));
    cold.push(performance.now() - t);
    // The link's usual path: the decrypted templates kept by the web process (DedupeService).
    t = performance.now();
    for (const x of templates) best = Math.max(best, cosine(probe, x.vector));
    warm.push(performance.now() - t);
  }
  if (best > 1.0001) throw new Error('a cosine above 1');
  engine.close();

  const k = summarise([...knn].sort((a, b) => a - b));
  const d = summarise([...dedupe].sort((a, b) => a - b));
  const sw = summarise([...warm].sort((a, b) => a - b));
  const sc = summarise([...cold].sort((a, b) => a - b));
  const markdown = [
    `${machine()}; N = ${n.toLocaleString('en')} enrolled, ${engine.effectiveFactory}, ${q} probes (genuine mates at cosine 0.6, the mate excluded), watch-list of ${w}; build ${fmt(buildS)} s.`,
    '',
    table(
      ['search', 'p50 ms', 'p99 ms', 'mean ms'],
      [
        ['knn k=5 (/identify, for comparison)', fmt(k.p50, 2), fmt(k.p99, 2), fmt(k.mean, 2)],
        ['dedupe k=5 excluding the linking user', fmt(d.p50, 2), fmt(d.p99, 2), fmt(d.mean, 2)],
        [`watch-list screen, ${w} templates kept decrypted (every link)`, fmt(sw.p50, 2), fmt(sw.p99, 2), fmt(sw.mean, 2)],
        [`watch-list screen, ${w} templates decrypted (first link after a list change)`, fmt(sc.p50, 2), fmt(sc.p99, 2), fmt(sc.mean, 2)],
      ],
    ),
    '',
    `The user's own row was the best hit for ${ownFirst}/${ids.length} probes and was excluded every time; other identities at or above DEDUPE_REVIEW_THRESHOLD: ${othersAbove}/${ids.length}.`,
  ].join('\n');
  saveResults('dedupe', { n, q, w, buildS, knn: k, dedupe: d, watchlist: { warm: sw, cold: sc }, ownFirst, othersAbove });
  return markdown;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(await runDedupeBench());
}
