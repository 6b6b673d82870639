/**
 * The statistics of a biometric evaluation (ISO/IEC 19795-1 vocabulary): error rates with exact
 * binomial confidence bounds, the threshold for a target false-match rate, and the false-positive
 * identification rate a 1:N search implies at a population size. Pure functions, no I/O.
 */

/** log of n choose k, exact enough for n up to millions (sums of logs). */
function logChoose(n: number, k: number): number {
  if (k < 0 || k > n) return -Infinity;
  k = Math.min(k, n - k);
  let s = 0;
  for (let i = 1; i <= k; i++) s += Math.log((n - k + i) / i);
  return s;
}

/** P(X <= k) for X ~ Binomial(n, p). */
export function binomialCdf(k: number, n: number, p: number): number {
  if (k >= n) return 1;
  if (k < 0) return 0;
  if (p <= 0) return 1;
  if (p >= 1) return 0;
  let sum = 0;
  const lp = Math.log(p),
    lq = Math.log1p(-p);
  for (let i = 0; i <= k; i++) sum += Math.exp(logChoose(n, i) + i * lp + (n - i) * lq);
  return Math.min(1, sum);
}

/**
 * One-sided upper confidence bound (Clopper-Pearson, exact) of a rate observed as `errors` in `n`
 * trials: the largest p for which seeing so few errors still has probability at least 1 - confidence.
 * With zero errors it is 1 - (1 - confidence)^(1/n), about 3/n at 95 % (the "rule of three").
 */
export function upperBound(errors: number, n: number, confidence = 0.95): number {
  if (n === 0) return 1;
  if (errors >= n) return 1;
  const alpha = 1 - confidence;
  if (errors === 0) return 1 - Math.pow(alpha, 1 / n);
  let lo = errors / n,
    hi = 1;
  for (let i = 0; i < 80; i++) {
    const mid = (lo + hi) / 2;
    if (binomialCdf(errors, n, mid) > alpha) lo = mid;
    else hi = mid;
  }
  return hi;
}

/** One-sided lower confidence bound (Clopper-Pearson): 0 with no errors. */
export function lowerBound(errors: number, n: number, confidence = 0.95): number {
  if (n === 0 || errors === 0) return 0;
  const alpha = 1 - confidence;
  let lo = 0,
    hi = errors / n;
  for (let i = 0; i < 80; i++) {
    const mid = (lo + hi) / 2;
    // P(X >= errors | mid) = 1 - P(X <= errors - 1)
    if (1 - binomialCdf(errors - 1, n, mid) < alpha) lo = mid;
    else hi = mid;
  }
  return lo;
}

export interface Rate {
  errors: number;
  n: number;
  rate: number;
  lower95: number;
  upper95: number;
}

export function rate(errors: number, n: number): Rate {
  return { errors, n, rate: n ? errors / n : NaN, lower95: lowerBound(errors, n), upper95: upperBound(errors, n) };
}

/**
 * FPIR of a 1:N search that compares a probe of someone not enrolled with N enrolled people, each
 * comparison falsely matching with probability `fmr` independently: 1 - (1 - fmr)^N (≈ N·FMR while small).
 */
export function fpirAt(fmr: number, population: number): number {
  if (fmr <= 0) return 0;
  if (fmr >= 1) return 1;
  return -Math.expm1(population * Math.log1p(-fmr));
}

export interface ThresholdRow {
  threshold: number;
  fmr: Rate;
  fnmr: Rate;
  /** FPIR at the population from the observed FMR and from its 95 % upper bound. */
  fpir: number;
  fpirUpper95: number;
}

/** FMR (impostor score >= t) and FNMR (genuine score < t) at each threshold. */
export function thresholdTable(genuine: readonly number[], impostor: readonly number[], thresholds: readonly number[], population: number): ThresholdRow[] {
  return thresholds.map((t) => {
    const fmr = rate(impostor.filter((s) => s >= t).length, impostor.length);
    const fnmr = rate(genuine.filter((s) => s < t).length, genuine.length);
    return { threshold: t, fmr, fnmr, fpir: fpirAt(fmr.rate, population), fpirUpper95: fpirAt(fmr.upper95, population) };
  });
}

export interface TargetThreshold {
  /** The lowest threshold whose FMR upper bound (95 %) is at or below the target, or null. */
  threshold: number | null;
  /** Why there is none: too few impostor pairs to claim the target at any threshold. */
  reason?: string;
  /** Impostor comparisons needed to claim the target with zero errors (rule of three). */
  impostorPairsNeeded: number;
}

/**
 * The threshold for a target FMR, claimed with 95 % confidence: the lowest candidate threshold (scores
 * and the grid) where the upper bound of the observed FMR is at or below the target. With n impostor
 * comparisons no threshold can claim an FMR below about 3/n.
 */
export function thresholdForTargetFmr(impostor: readonly number[], targetFmr: number, grid: readonly number[]): TargetThreshold {
  const needed = Math.ceil(Math.log(0.05) / Math.log1p(-targetFmr));
  const floor = upperBound(0, impostor.length);
  if (floor > targetFmr) {
    return {
      threshold: null,
      impostorPairsNeeded: needed,
      reason: `${impostor.length} impostor comparisons can claim an FMR no lower than ${floor.toExponential(2)} (95 %); the target needs at least ${needed}`,
    };
  }
  // Candidate thresholds: just above each impostor score, and the grid. The errors (and so the bound)
  // only fall as the threshold rises: a binary search finds the lowest candidate that meets the bound.
  const candidates = [...new Set([...grid, ...impostor.map((s) => s + 1e-6)])].sort((a, b) => a - b);
  const sorted = [...impostor].sort((a, b) => a - b);
  const errorsAt = (t: number) => {
    let lo = 0,
      hi = sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (sorted[mid]! >= t) hi = mid;
      else lo = mid + 1;
    }
    return sorted.length - lo;
  };
  const meets = (t: number) => upperBound(errorsAt(t), sorted.length) <= targetFmr;
  let lo = 0,
    hi = candidates.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (meets(candidates[mid]!)) hi = mid;
    else lo = mid + 1;
  }
  // Rounded up, never down: a rounded-down threshold could fall back onto an impostor score.
  if (lo < candidates.length) return { threshold: Math.ceil(candidates[lo]! * 1e4) / 1e4, impostorPairsNeeded: needed };
  return { threshold: null, impostorPairsNeeded: needed, reason: 'no threshold meets the bound' };
}
