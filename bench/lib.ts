/** Shared helpers of the benchmarks: percentiles, synthetic embeddings, tables, results files. */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const RESULTS_DIR = path.join(ROOT, 'var', 'bench');

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export function summarise(samples: readonly number[]): { n: number; p50: number; p99: number; mean: number; max: number } {
  const s = [...samples].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / Math.max(1, s.length);
  return { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), mean, max: s[s.length - 1] ?? NaN };
}

export const fmt = (x: number | null | undefined, digits = 1) => (x == null || Number.isNaN(x) ? '–' : x.toFixed(digits));
export const mib = (bytes: number) => bytes / 1024 / 1024;

export function table(headers: string[], rows: (string | number)[][]): string {
  const lines = [`| ${headers.join(' | ')} |`, `|${headers.map(() => '---').join('|')}|`];
  for (const r of rows) lines.push(`| ${r.join(' | ')} |`);
  return lines.join('\n');
}

export function machine(): string {
  return `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB RAM, Node ${process.version}`;
}

export function saveResults(name: string, data: unknown): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, `${name}.json`);
  writeFileSync(file, JSON.stringify({ at: new Date().toISOString(), machine: machine(), ...(data as object) }, null, 2));
  return file;
}

/** Small fast deterministic PRNG (mulberry32). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * xoshiro128** (period 2^128 - 1), seeded through splitmix32: for the search datasets, whose rows take
 * 512 draws each. `rng` (mulberry32, one 32-bit state) repeats after 2^32 draws, i.e. after 2^23 =
 * 8,388,608 rows of 512: a 10M gallery drawn from it holds its first 1.6M rows twice, and the probes'
 * deviations reappear as gallery rows (found by the 10M run of 25 November).
 */
export function longRng(seed: number): () => number {
  let z = seed >>> 0;
  const splitmix = () => {
    z = (z + 0x9e3779b9) | 0;
    let t = z ^ (z >>> 16);
    t = Math.imul(t, 0x21f0aaad);
    t ^= t >>> 15;
    t = Math.imul(t, 0x735a2d97);
    return (t ^ (t >>> 15)) >>> 0;
  };
  let a = splitmix(),
    b = splitmix(),
    c = splitmix(),
    d = splitmix();
  if ((a | b | c | d) === 0) a = 1;
  return () => {
    const r = Math.imul((Math.imul(b, 5) << 7) | (Math.imul(b, 5) >>> 25), 9) >>> 0;
    const t = b << 9;
    c ^= a;
    d ^= b;
    b ^= c;
    a ^= d;
    c ^= t;
    d = (d << 11) | (d >>> 21);
    return r / 4294967296;
  };
}

export const DIM = 512;

/**
 * Enrolled identity `i`: a random direction (uniform components, normalised). Independent vectors
 * of this kind have cosines around 0 (sd ~ 1/sqrt(512) = 0.044). Deterministic in `i`, so that every
 * benchmark process can rebuild any vector without sharing memory.
 */
export function enrolledVector(i: number, out = new Float32Array(DIM)): Float32Array {
  const r = rng(0x9e3779b9 ^ Math.imul(i + 1, 0x85ebca6b));
  let ss = 0;
  for (let j = 0; j < DIM; j++) {
    const x = r() - 0.5;
    out[j] = x;
    ss += x * x;
  }
  const inv = 1 / Math.sqrt(ss);
  for (let j = 0; j < DIM; j++) out[j]! *= inv;
  return out;
}

/** The genuine probe of identity `i`: a second vector at cosine exactly `c` (0.6) with enrolledVector(i). */
export function probeVector(i: number, c = 0.6): Float32Array {
  const e = enrolledVector(i);
  const r = rng(0x27d4eb2f ^ Math.imul(i + 7, 0x165667b1));
  const n = new Float32Array(DIM);
  let d = 0;
  for (let j = 0; j < DIM; j++) {
    n[j] = r() - 0.5;
    d += n[j]! * e[j]!;
  }
  let ss = 0;
  for (let j = 0; j < DIM; j++) {
    n[j] = n[j]! - d * e[j]!;
    ss += n[j]! * n[j]!;
  }
  const k = Math.sqrt(1 - c * c) / Math.sqrt(ss);
  const out = new Float32Array(DIM);
  for (let j = 0; j < DIM; j++) out[j] = c * e[j]! + k * n[j]!;
  return out;
}

/** The user id of synthetic identity `i`: md5(i) as a uuid, the same as PostgreSQL's md5(i::text)::uuid. */
export function syntheticUserId(i: number): string {
  const h = createHash('md5').update(String(i)).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Which identities are queried: `q` of them spread evenly over `n`. */
export function queriedIdentities(n: number, q: number): number[] {
  const step = Math.max(1, Math.floor(n / q));
  return Array.from({ length: Math.min(q, n) }, (_, j) => j * step);
}

export interface ClosedLoopResult {
  done: number;
  wallSeconds: number;
  perSecond: number;
  /** CPU time of this process per completed call (ms): meaningful when `fn` runs in this process. */
  cpuMsPerCall: number;
  /** Wall milliseconds of each call, in completion order. */
  samples: number[];
}

/**
 * A closed-loop load generator: `inFlight` callers, each starting its next call as soon as the last one
 * returns, for `seconds`. Inputs are taken round-robin from `inputs`.
 */
export async function closedLoop<T>(inFlight: number, seconds: number, inputs: readonly T[], fn: (input: T) => Promise<unknown>): Promise<ClosedLoopResult> {
  const samples: number[] = [];
  let next = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        await fn(inputs[next++ % inputs.length]!);
        samples.push(performance.now() - t);
      }
    }),
  );
  const wallSeconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const done = samples.length;
  return { done, wallSeconds, perSecond: done / wallSeconds, cpuMsPerCall: (cpu.user + cpu.system) / 1000 / Math.max(1, done), samples };
}
