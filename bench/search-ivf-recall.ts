/**
 * Could an inverted file make candidate generation sub-linear on the bench's data? (docs/vector-index.md,
 * "Sub-linear candidate generation"). For an IVF index (k-means coarse quantiser, inner product), a
 * probe finds its mate only if the mate's list is among the `nprobe` lists nearest the probe; that
 * depends on the data and on nlist, not on N. So this measures, for each nlist, the share of probes
 * whose mate's list is within the first nprobe (recall of the mates), against the share of the
 * gallery those nprobe lists hold (the fraction scanned: list sizes from a sample of the gallery).
 *
 *   node --import tsx bench/search-ivf-recall.ts DIR [nlist,...] [--cos LO-HI,...] [--train ROWS] [--spill M,...]
 *
 * DIR: bench/search-data.ts format. k-means: 10 Lloyd iterations on a `--train`-row sample (default
 * 50k; assignments by FAISS IndexFlatIP, BLAS); list sizes from 100k gallery rows. Prints one line per
 * (nlist, nprobe) and a JSON line at the end.
 *
 * --cos: instead of the dataset's own probes, new ones for the same mate rows at a cosine drawn
 * uniformly in each band LO-HI (the deviation: another gallery row, half the gallery away, made
 * orthogonal to the mate: another identity of the same generator, as bench/search-data.ts draws
 * them). For each (nlist, band) it also prints the least nprobe whose mates found reach 99 % and the
 * share of the gallery those lists hold: how the work for recall 0.99 depends on the mates' cosine.
 *
 * --spill: the same with every gallery row stored in its M nearest lists (M list entries per row: more
 * memory for fewer lists probed); the rows scanned count every entry read, duplicates included.
 */
import { openSync, readSync } from 'node:fs';
import path from 'node:path';
import faiss from 'faiss-node';
import { openDataset } from './search-data.js';
import { DIM } from './lib.js';

const option = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i < 0 ? undefined : process.argv[i + 1];
};
const positional = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && !all[i - 1]?.startsWith('--'));
const dir = positional[0];
if (!dir) throw new Error('usage: bench/search-ivf-recall.ts DIR [nlist,...] [--cos LO-HI,...] [--train ROWS]');
const nlists = (positional[1] ?? '1024,4096').split(',').map(Number);
const bands = option('--cos')
  ?.split(',')
  .map((b) => b.split('-').map(Number) as [number, number]);
const TRAIN = Number(option('--train') ?? 50_000);
const SPILLS = (option('--spill') ?? '1').split(',').map(Number);
const ds = openDataset(dir);

const galleryFd = openSync(path.join(dir, 'gallery.f32'), 'r');
function rows(from: number, count: number): Float32Array {
  const out = new Float32Array(count * DIM);
  readSync(galleryFd, new Uint8Array(out.buffer), 0, out.byteLength, from * DIM * 4);
  return normalise(out);
}
function normalise<T extends Float32Array>(x: T): T {
  for (let r = 0; r < x.length / DIM; r++) {
    let ss = 0;
    for (let i = 0; i < DIM; i++) ss += x[r * DIM + i]! ** 2;
    const s = 1 / Math.sqrt(ss);
    for (let i = 0; i < DIM; i++) x[r * DIM + i]! *= s;
  }
  return x;
}
/**
 * Every step-th row, `count` of them, none of them a probe's mate: the mates are rows of the gallery
 * the partition was not trained on, as nearly all rows are in a real index (the mates sit at multiples
 * of N / Q, which a plain stride would hit every time, and k-means with a few rows per centroid fits
 * its training rows: that made the lists look better than they are).
 */
function sample(wanted: number): Float32Array {
  const count = Math.min(wanted, ds.n - mateSet.size);
  const step = Math.max(1, Math.floor(ds.n / count));
  const out = new Float32Array(count * DIM);
  let r = 0;
  for (let j = 0; j < count; j++, r += step) {
    while (mateSet.has(r % ds.n)) r++;
    out.set(rows(r % ds.n, 1), j * DIM);
  }
  return out;
}
/** The k nearest centroids of each row of x (FAISS, in chunks: faiss-node takes plain arrays). */
const nearest = (centroids: Float32Array, x: Float32Array, k: number) => {
  const index = new faiss.IndexFlatIP(DIM);
  index.add(Array.from(centroids));
  const out: number[] = [];
  for (let r = 0; r < x.length / DIM; r += 2000) {
    const labels = index.search(Array.from(x.subarray(r * DIM, Math.min(x.length, (r + 2000) * DIM))), k).labels;
    for (const l of labels) out.push(l);
  }
  return out;
};

const mates = Array.from(ds.mates);
const mateSet = new Set(mates.filter((m) => m >= 0));
const train = sample(TRAIN);
const gallerySample = sample(100_000);
const mateRows = new Float32Array(mates.length * DIM);
mates.forEach((m, j) => mateRows.set(rows(Math.max(0, m), 1), j * DIM));
/** Probes at cosine U[lo, hi] with their mate; deterministic (a fixed LCG). */
function probesAt([lo, hi]: [number, number]): Float32Array {
  let seed = 0x2545f491;
  const uniform = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  const out = new Float32Array(mates.length * DIM);
  mates.forEach((m, j) => {
    const e = mateRows.subarray(j * DIM, (j + 1) * DIM);
    const dev = rows((Math.max(0, m) + Math.floor(ds.n / 2)) % ds.n, 1);
    let d = 0;
    for (let i = 0; i < DIM; i++) d += dev[i]! * e[i]!;
    for (let i = 0; i < DIM; i++) dev[i] = dev[i]! - d * e[i]!;
    normalise(dev);
    const c = lo + (hi - lo) * uniform();
    const s = Math.sqrt(1 - c * c);
    for (let i = 0; i < DIM; i++) out[j * DIM + i] = c * e[i]! + s * dev[i]!;
  });
  return out;
}
const probeSets: { band: string; probes: Float32Array }[] = bands
  ? bands.map((b) => ({ band: `${b[0]}-${b[1]}`, probes: probesAt(b) }))
  : [{ band: 'dataset', probes: normalise(Float32Array.from(ds.probes)) }];
const results: unknown[] = [];
const at99: unknown[] = [];
for (const nlist of nlists) {
  // k-means (spherical: centroids renormalised), initialised on sample rows.
  let centroids: Float32Array = Float32Array.from(train.subarray(0, nlist * DIM));
  for (let it = 0; it < 10; it++) {
    const assign = nearest(centroids, train, 1);
    const sum = new Float64Array(nlist * DIM);
    const cnt = new Int32Array(nlist);
    for (let r = 0; r < assign.length; r++) {
      const c = assign[r]!;
      cnt[c]!++;
      for (let i = 0; i < DIM; i++) sum[c * DIM + i]! += train[r * DIM + i]!;
    }
    const next = new Float32Array(nlist * DIM);
    for (let c = 0; c < nlist; c++) for (let i = 0; i < DIM; i++) next[c * DIM + i] = cnt[c] ? sum[c * DIM + i]! : centroids[c * DIM + i]!;
    centroids = normalise(next);
  }
  const size = new Float64Array(nlist);
  for (const c of nearest(centroids, gallerySample, 1)) size[c]! += DIM / gallerySample.length;
  const mateList = nearest(centroids, mateRows, 1);
  // Each row in its m nearest lists: list sizes in rows per gallery row (they add up to m).
  const spilled = SPILLS.map((m) => {
    const sizeM = new Float64Array(nlist);
    for (const c of nearest(centroids, gallerySample, m)) sizeM[c]! += DIM / gallerySample.length;
    return { m, size: sizeM, mateLists: nearest(centroids, mateRows, m) };
  });
  for (const { band, probes } of probeSets) {
    const ranked = nearest(centroids, probes, nlist);
    for (const nprobe of [1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096].filter((p) => p <= nlist)) {
      let found = 0,
        withMate = 0,
        scanned = 0;
      for (let j = 0; j < mates.length; j++) {
        const lists = ranked.slice(j * nlist, j * nlist + nprobe);
        for (const l of lists) scanned += size[l]!;
        if (mates[j]! < 0) continue;
        withMate++;
        if (lists.includes(mateList[j]!)) found++;
      }
      const r = { nlist, band, nprobe, mateRecall: found / withMate, fractionScanned: scanned / mates.length };
      results.push(r);
      console.log(
        `nlist ${nlist} cos ${band} nprobe ${nprobe}: mates found ${(100 * r.mateRecall).toFixed(1)} %, gallery scanned ${(100 * r.fractionScanned).toFixed(1)} %`,
      );
    }
    // The least nprobe with 99 % of the mates found: the 99th percentile of the rank of the first
    // probed list that holds the mate (with --spill m, every row is stored in its m nearest lists).
    const position = new Int32Array(nlist);
    for (const { m, size: sizeM, mateLists } of spilled) {
      const ranks: number[] = [];
      for (let j = 0; j < mates.length; j++) {
        if (mates[j]! < 0) continue;
        for (let p = 0; p < nlist; p++) position[ranked[j * nlist + p]!] = p;
        let best = nlist;
        for (let t = 0; t < m; t++) best = Math.min(best, position[mateLists[j * m + t]!]!);
        ranks.push(best + 1);
      }
      ranks.sort((a, b) => a - b);
      const nprobe = ranks[Math.ceil(0.99 * ranks.length) - 1]!;
      let scanned = 0;
      for (let j = 0; j < mates.length; j++) for (const l of ranked.slice(j * nlist, j * nlist + nprobe)) scanned += sizeM[l]!;
      const r = { nlist, band, spill: m, nprobeFor99: nprobe, fractionScannedFor99: scanned / mates.length };
      at99.push(r);
      console.log(
        `nlist ${nlist} cos ${band} spill ${m}: 99 % of the mates need nprobe ${nprobe}, ${(100 * r.fractionScannedFor99).toFixed(2)} % of the gallery's rows scanned`,
      );
    }
  }
}
console.log(JSON.stringify({ dir, n: ds.n, train: TRAIN, at99, results }));
