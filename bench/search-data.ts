/**
 * Datasets of the 1:N search benchmark (bench/search.ts), in the external format anyone can produce
 * from their own embeddings:
 *
 *   DIR/gallery.f32   N x 512 float32 little-endian, row-major (the enrolled population)
 *   DIR/probes.f32    Q x 512 float32 little-endian (the searches)
 *   DIR/mates.i32     Q int32 little-endian: the gallery row of each probe's mate, or -1
 *
 * Gallery row r is enrolled as user syntheticUserId(r). The two synthetic generators of
 * ../shared/notes/vector-search.md are written in this format:
 *   - uniform: each identity a random direction (impostor cosines sd 0.044);
 *   - clustered (low intrinsic dimension): identity = unit(unit(z A) + 1.22 unit(n)), z ~ N(0, I16),
 *     A a fixed random 16 x 512 matrix, n isotropic (impostor cosines sd ~0.11, like face embeddings).
 *   - cube: components uniform in [-0.5, 0.5], normalised: nearly isotropic in 512-d (impostor sd
 *     0.044 like `uniform`) and about 10x cheaper to draw; used for the bounded 10M run.
 * Genuine probes sit at a cosine drawn uniformly in [0.45, 0.65] with their mate, the deviation drawn
 * like another identity of the same generator (the hard, realistic case).
 */
import { closeSync, existsSync, fstatSync, mkdirSync, openSync, readSync, statSync, writeSync } from 'node:fs';
import path from 'node:path';
import { DIM, longRng as rng } from './lib.js';

export type Generator = 'uniform' | 'clustered' | 'cube';

export interface Dataset {
  dir: string;
  n: number;
  q: number;
  probes: Float32Array;
  mates: Int32Array;
}

function gaussian(r: () => number): () => number {
  let spare: number | null = null;
  return () => {
    if (spare !== null) {
      const s = spare;
      spare = null;
      return s;
    }
    let u = 0;
    while (u === 0) u = r();
    const v = r();
    const m = Math.sqrt(-2 * Math.log(u));
    spare = m * Math.sin(2 * Math.PI * v);
    return m * Math.cos(2 * Math.PI * v);
  };
}

function unitInPlace(v: Float32Array): Float32Array {
  let ss = 0;
  for (let i = 0; i < v.length; i++) ss += v[i]! * v[i]!;
  const s = 1 / Math.sqrt(ss);
  for (let i = 0; i < v.length; i++) v[i]! *= s;
  return v;
}

/** Draws identity vectors of one generator (deterministic in the seed). */
function identitySampler(gen: Generator, seed: number): (out: Float32Array) => Float32Array {
  if (gen === 'cube') {
    const r = rng(seed);
    return (out) => {
      for (let j = 0; j < DIM; j++) out[j] = r() - 0.5;
      return unitInPlace(out);
    };
  }
  const g = gaussian(rng(seed));
  if (gen === 'uniform') {
    return (out) => {
      for (let j = 0; j < DIM; j++) out[j] = g();
      return unitInPlace(out);
    };
  }
  const LATENT = 16,
    EPS = 1.22;
  const ga = gaussian(rng(0x5eed));
  const A = new Float32Array(LATENT * DIM);
  for (let i = 0; i < A.length; i++) A[i] = ga();
  const base = new Float32Array(DIM),
    noise = new Float32Array(DIM),
    z = new Float32Array(LATENT);
  return (out) => {
    for (let i = 0; i < LATENT; i++) z[i] = g();
    base.fill(0);
    for (let i = 0; i < LATENT; i++) {
      const zi = z[i]!,
        o = i * DIM;
      for (let j = 0; j < DIM; j++) base[j]! += zi * A[o + j]!;
    }
    unitInPlace(base);
    for (let j = 0; j < DIM; j++) noise[j] = g();
    unitInPlace(noise);
    for (let j = 0; j < DIM; j++) out[j] = base[j]! + EPS * noise[j]!;
    return unitInPlace(out);
  };
}

/** Writes a dataset of `n` identities and `q` genuine probes (mates spread evenly over the gallery). */
export function generateDataset(dir: string, gen: Generator, n: number, q: number, log: (s: string) => void = () => {}): void {
  mkdirSync(dir, { recursive: true });
  const draw = identitySampler(gen, gen === 'uniform' ? 11 : gen === 'cube' ? 55 : 22);
  const step = Math.max(1, Math.floor(n / q));
  const mateRows = Array.from({ length: Math.min(q, n) }, (_, j) => j * step);
  const wanted = new Set(mateRows);
  const kept = new Map<number, Float32Array>();
  const fd = openSync(path.join(dir, 'gallery.f32'), 'w');
  const CH = 8192;
  const buf = new Float32Array(CH * DIM);
  const v = new Float32Array(DIM);
  const t0 = Date.now();
  for (let r0 = 0; r0 < n; r0 += CH) {
    const m = Math.min(CH, n - r0);
    for (let i = 0; i < m; i++) {
      draw(v);
      buf.set(v, i * DIM);
      if (wanted.has(r0 + i)) kept.set(r0 + i, Float32Array.from(v));
    }
    const bytes = new Uint8Array(buf.buffer, 0, m * DIM * 4);
    for (let o = 0; o < bytes.length;) o += writeSync(fd, bytes, o, bytes.length - o);
    if ((r0 / CH) % 128 === 0 && r0) log(`  generated ${r0.toLocaleString('en')} / ${n.toLocaleString('en')} (${Math.round((Date.now() - t0) / 1000)} s)`);
  }
  closeSync(fd);
  // Probes: cos c in [0.45, 0.65] with the mate; the deviation is another identity's direction,
  // made orthogonal to the mate.
  const cr = rng(gen === 'uniform' ? 33 : gen === 'cube' ? 66 : 44);
  const probes = new Float32Array(mateRows.length * DIM);
  const dev = new Float32Array(DIM);
  mateRows.forEach((row, j) => {
    const e = kept.get(row)!;
    draw(dev);
    let d = 0;
    for (let i = 0; i < DIM; i++) d += dev[i]! * e[i]!;
    for (let i = 0; i < DIM; i++) dev[i] = dev[i]! - d * e[i]!;
    unitInPlace(dev);
    const c = 0.45 + 0.2 * cr();
    const s = Math.sqrt(1 - c * c);
    for (let i = 0; i < DIM; i++) probes[j * DIM + i] = c * e[i]! + s * dev[i]!;
  });
  writeAll(path.join(dir, 'probes.f32'), new Uint8Array(probes.buffer));
  writeAll(path.join(dir, 'mates.i32'), new Uint8Array(Int32Array.from(mateRows).buffer));
}

function writeAll(file: string, bytes: Uint8Array): void {
  const fd = openSync(file, 'w');
  for (let o = 0; o < bytes.length;) o += writeSync(fd, bytes, o, bytes.length - o);
  closeSync(fd);
}

function readAll(file: string): Uint8Array {
  const fd = openSync(file, 'r');
  const size = fstatSync(fd).size;
  const out = new Uint8Array(size);
  for (let o = 0; o < size;) {
    const got = readSync(fd, out, o, size - o, o);
    if (got <= 0) throw new Error(`short read of ${file}`);
    o += got;
  }
  closeSync(fd);
  return out;
}

/** Opens a dataset directory (the gallery is streamed, not loaded: see readGallery). */
export function openDataset(dir: string): Dataset {
  for (const f of ['gallery.f32', 'probes.f32', 'mates.i32']) if (!existsSync(path.join(dir, f))) throw new Error(`${dir}/${f} is missing`);
  const gBytes = statSync(path.join(dir, 'gallery.f32')).size;
  if (gBytes % (DIM * 4)) throw new Error('gallery.f32 is not N x 512 float32');
  const p = readAll(path.join(dir, 'probes.f32'));
  const m = readAll(path.join(dir, 'mates.i32'));
  if (p.length % (DIM * 4) || m.length * DIM !== p.length) throw new Error('probes.f32 / mates.i32 do not match (Q x 512 float32, Q int32)');
  const probes = new Float32Array(p.buffer, 0, p.length / 4);
  const mates = new Int32Array(m.buffer, 0, m.length / 4);
  return { dir, n: gBytes / (DIM * 4), q: mates.length, probes, mates };
}

/** Calls `onRows(firstRow, rows)` for consecutive chunks of the gallery. */
export async function readGallery(ds: Dataset, chunk: number, onRows: (first: number, rows: Float32Array) => Promise<void> | void): Promise<void> {
  const fd = openSync(path.join(ds.dir, 'gallery.f32'), 'r');
  try {
    for (let r0 = 0; r0 < ds.n; r0 += chunk) {
      const m = Math.min(chunk, ds.n - r0);
      const bytes = new Uint8Array(m * DIM * 4);
      for (let o = 0; o < bytes.length;) {
        const got = readSync(fd, bytes, o, bytes.length - o, r0 * DIM * 4 + o);
        if (got <= 0) throw new Error('short read of gallery.f32');
        o += got;
      }
      await onRows(r0, new Float32Array(bytes.buffer));
    }
  } finally {
    closeSync(fd);
  }
}
