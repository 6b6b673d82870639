/**
 * Could an inverted file make candidate generation sub-linear on the bench's data? (docs/vector-index.md,
 * "Sub-linear candidate generation"). For an IVF index (k-means coarse quantiser, inner product), a
 * probe finds its mate only if the mate's list is among the `nprobe` lists nearest the probe; that
 * depends on the data and on nlist, not on N. So this measures, for each nlist, the share of probes
 * whose mate's list is within the first nprobe (recall of the mates), against the share of the
 * gallery those nprobe lists hold (the fraction scanned: list sizes from a sample of the gallery).
 *
 *   node --import tsx bench/search-ivf-recall.ts DIR [nlist,...]      (DIR: bench/search-data.ts format)
 *
 * k-means: 10 Lloyd iterations on a 50k-row sample (assignments by FAISS IndexFlatIP, BLAS); list
 * sizes from 100k gallery rows. Prints one line per (nlist, nprobe) and a JSON line at the end.
 */
import { openSync, readSync } from 'node:fs';
import path from 'node:path';
import faiss from 'faiss-node';
import { openDataset } from './search-data.js';
import { DIM } from './lib.js';

const dir = process.argv[2];
if (!dir) throw new Error('usage: bench/search-ivf-recall.ts DIR [nlist,...]');
const nlists = (process.argv[3] ?? '1024,4096').split(',').map(Number);
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
/** Every step-th row, `count` of them. */
function sample(wanted: number): Float32Array {
  const count = Math.min(wanted, ds.n);
  const step = Math.max(1, Math.floor(ds.n / count));
  const out = new Float32Array(count * DIM);
  for (let j = 0; j < count; j++) out.set(rows(j * step, 1), j * DIM);
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

const train = sample(50_000);
const gallerySample = sample(100_000);
const probes = normalise(Float32Array.from(ds.probes));
const mates = Array.from(ds.mates);
const mateRows = new Float32Array(mates.length * DIM);
mates.forEach((m, j) => mateRows.set(rows(Math.max(0, m), 1), j * DIM));
const results: unknown[] = [];
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
  const ranked = nearest(centroids, probes, nlist);
  for (const nprobe of [1, 4, 16, 64, 128, 256, 512, 1024, 2048].filter((p) => p <= nlist)) {
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
    const r = { nlist, nprobe, mateRecall: found / withMate, fractionScanned: scanned / mates.length };
    results.push(r);
    console.log(`nlist ${nlist} nprobe ${nprobe}: mates found ${(100 * r.mateRecall).toFixed(1)} %, gallery scanned ${(100 * r.fractionScanned).toFixed(1)} %`);
  }
}
console.log(JSON.stringify({ dir, n: ds.n, results }));
