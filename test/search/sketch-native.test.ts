/**
 * The project's native Hamming scan and exact re-rank (native/search-kernel/src/sketch.cc) against a
 * brute-force reference in JS: the k live rows of smallest Hamming distance, ties in row order, with
 * tombstones, for the AVX-512 kernel and the portable one, one query at a time and in a batch, with
 * enough rows (> 65,536) for the sampled starting threshold to be used. And the refine step and
 * `VectorStore.rerank`.
 */
import test from 'ava';
import { SketchIndex, VectorStore, scanIsa } from '../../features/search/worker/search-kernel.js';
import { rng } from '../helpers/vectors.js';

const D = 512;
const BYTES = 64;
const N = 70_000;

const POP = Uint8Array.from({ length: 256 }, (_, v) => {
  let c = 0;
  for (let b = v; b; b &= b - 1) c++;
  return c;
});

const r = rng(7);
const queries = Float32Array.from({ length: 4 * D }, () => r() - 0.5);
function build() {
  const s = new SketchIndex(D, 512, 99);
  const qcodes = s.encode(queries);
  const codes = new Uint8Array(N * BYTES);
  for (let i = 0; i < codes.length; i++) codes[i] = (r() * 256) | 0;
  // Rows near the queries (a few bits flipped), several of them exact copies: ties at distance 0.
  for (let q = 0; q < 4; q++) {
    for (let j = 0; j < 40; j++) {
      const row = 1000 + q * 15_000 + j * 97;
      codes.set(qcodes.subarray(q * BYTES, (q + 1) * BYTES), row * BYTES);
      for (let f = 0; f < j % 9; f++) codes[row * BYTES + ((j * 7 + f * 13) % BYTES)]! ^= 1 << (f % 8);
    }
  }
  s.addCodes(codes);
  return { s, codes, qcodes };
}

function reference(codes: Uint8Array, qcode: Uint8Array, dead: Set<number>, k: number) {
  const all: [number, number][] = [];
  for (let row = 0; row < codes.length / BYTES; row++) {
    if (dead.has(row)) continue;
    let d = 0;
    for (let b = 0; b < BYTES; b++) d += POP[codes[row * BYTES + b]! ^ qcode[b]!]!;
    all.push([d, row]);
  }
  all.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  return all.slice(0, k);
}

// One data set, shared by the tests (the reference scan in JS is the slow part).
const data = build();
const deadRows = Array.from({ length: 3000 }, (_, i) => (i * 23 + 5) % N).concat([1000, 1000 + 97 * 3]);
const dead = new Set(deadRows);
data.s.setDead(Int32Array.from(deadRows), true);
process.env.SKETCH_NO_AVX512 = '1';
const portable = new SketchIndex(D, 512, 99);
delete process.env.SKETCH_NO_AVX512;
portable.addCodes(data.codes);
portable.setDead(Int32Array.from(deadRows), true);

test('the Hamming scan returns the k live rows of smallest distance, ties in row order, one query or a batch, on every kernel', (t) => {
  t.log(`kernel in use: ${scanIsa}`);
  for (const k of [10, 2000]) {
    const refs = [0, 1, 2, 3].map((q) => reference(data.codes, data.qcodes.subarray(q * BYTES, (q + 1) * BYTES), dead, k));
    for (const [name, s] of [
      ['default', data.s],
      ['portable', portable],
    ] as const) {
      const batch = s.search(queries, k);
      for (let q = 0; q < 4; q++) {
        const one = s.search(queries.subarray(q * D, (q + 1) * D), k);
        t.deepEqual(
          Array.from(one.labels),
          refs[q]!.map((x) => x[1]),
          `${name} k=${k} query ${q}: labels`,
        );
        t.deepEqual(
          Array.from(one.distances),
          refs[q]!.map((x) => x[0]),
          `${name} k=${k} query ${q}: distances`,
        );
        t.deepEqual(Array.from(batch.labels.subarray(q * k, (q + 1) * k)), Array.from(one.labels), `${name} k=${k} query ${q}: batch = single`);
      }
    }
  }
});

test('k beyond the live rows pads with -1; a dead row is never returned', (t) => {
  const s = new SketchIndex(D, 512, 99);
  s.addCodes(data.codes.subarray(0, 50 * BYTES));
  s.setDead(Int32Array.from([3, 4]), true);
  const { labels, distances } = s.search(queries.subarray(0, D), 60);
  t.is(labels.filter((x) => x >= 0).length, 48);
  t.false(Array.from(labels).includes(3) || Array.from(labels).includes(4));
  t.deepEqual(Array.from(labels.subarray(48)), Array(12).fill(-1));
  t.deepEqual(Array.from(distances.subarray(48)), Array(12).fill(-1));
});

test('refine: the best `refine` of the Hamming candidates by the asymmetric estimate, the same in a batch and on every kernel', (t) => {
  const k = 500,
    m = 50;
  const batch = data.s.search(queries, k, m);
  const batchPortable = portable.search(queries, k, m);
  t.is(batch.labels.length, 4 * m);
  t.deepEqual(Array.from(batchPortable.labels), Array.from(batch.labels));
  for (let q = 0; q < 4; q++) {
    const cand = new Set(reference(data.codes, data.qcodes.subarray(q * BYTES, (q + 1) * BYTES), dead, k).map((x) => x[1]));
    const one = data.s.search(queries.subarray(q * D, (q + 1) * D), k, m);
    t.deepEqual(Array.from(one.labels), Array.from(batch.labels.subarray(q * m, (q + 1) * m)));
    t.is(new Set(one.labels).size, m);
    t.true(
      Array.from(one.labels).every((x) => cand.has(x)),
      'refined rows are Hamming candidates',
    );
  }
  // refine >= k: the plain Hamming order.
  t.deepEqual(Array.from(data.s.search(queries, k, k).labels), Array.from(data.s.search(queries, k).labels));
});

test('VectorStore.rerank keeps the k best candidates by exact inner product (ties: lower row), skips -1', (t) => {
  const store = new VectorStore(4, null, 0);
  store.append(Float32Array.from([1, 0, 0, 0, 0, 1, 0, 0, 0.5, 0.5, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0]));
  const q = Float32Array.from([1, 0.1, 0, 0, 0, 0, 1, 0]);
  const { labels, scores } = store.rerank(q, Int32Array.from([4, 3, -1, 0, 1, 2, 4, -1]), 3);
  t.deepEqual(Array.from(labels.subarray(0, 3)), [0, 3, 4]); // rows 0 and 3 tie at 1: row 0 first
  t.deepEqual(Array.from(labels.subarray(3)), [4, 1, 2]); // rows 1 and 2 tie at 0: row 1 first; -1 skipped
  t.true(Math.abs(scores[0]! - 1) < 1e-6 && Math.abs(scores[2]!) < 1e-6);
  t.true(Math.abs(scores[3]! - 1) < 1e-6 && Math.abs(scores[4]!) < 1e-6);
  // Fewer valid candidates than k: -1 / NaN after them.
  const few = store.rerank(q.subarray(0, 4), Int32Array.from([-1, 2, -1]), 2);
  t.deepEqual(Array.from(few.labels), [2, -1]);
  t.true(Number.isNaN(few.scores[1]!));
});
