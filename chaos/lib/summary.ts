/**
 * The figures of one fault phase, from the samples of the load (chaos/lib/load.ts): pure, so that
 * test/chaos-summary.test.ts checks the arithmetic without a fault.
 */
import type { Kind, Sample } from './load.js';

export interface PhaseFigures {
  requests: number;
  /** `<kind> <status>` → count; status 0 = no answer. */
  statuses: Record<string, number>;
  other5xx: number;
  unavailable: number;
  unavailableWithoutRetryAfter: number;
  hangs: number;
  slowestMs: number;
  /** Requests in flight when the fault struck: their statuses and the slowest. */
  inFlightAtFault: { requests: number; statuses: Record<string, number>; slowestMs: number };
  /**
   * Requests sent from a second after the fault until the dependency was back (or, without a known
   * time, until the first 200): how they were answered and how fast the 503s came (fail-fast).
   */
  whileAway: { requests: number; statuses: Record<string, number>; unavailable: number; slowest503Ms: number; over1s503: number };
  /** From the fault to the answer of the first request of `kinds` sent after it that got 200. */
  recoveryMs: number | null;
  /** From `backAt` (dependency or process back) to the first 200 of `kinds` sent after it. */
  recoveryAfterBackMs: number | null;
}

const count = (samples: Sample[]) => {
  const out: Record<string, number> = {};
  for (const s of samples) out[`${s.kind} ${s.status}`] = (out[`${s.kind} ${s.status}`] ?? 0) + 1;
  return out;
};

export function summarise(window: Sample[], o: { faultAt: number; backAt?: number; kinds: Kind[]; hangMs: number }): PhaseFigures {
  const end = (s: Sample) => s.at + s.ms;
  const firstOk = (from: number) => window.filter((s) => s.at >= from && o.kinds.includes(s.kind) && s.status === 200).sort((a, b) => end(a) - end(b))[0];
  const ok = firstOk(o.faultAt);
  const okBack = o.backAt !== undefined ? firstOk(o.backAt) : undefined;
  const inFlight = window.filter((s) => s.at < o.faultAt && end(s) >= o.faultAt);
  const awayEnd = o.backAt ?? (ok ? ok.at : Infinity);
  const away = window.filter((s) => s.at >= o.faultAt + 1000 && s.at < awayEnd);
  const away503 = away.filter((s) => s.status === 503);
  return {
    requests: window.length,
    statuses: count(window),
    other5xx: window.filter((s) => s.status >= 500 && s.status !== 503).length,
    unavailable: window.filter((s) => s.status === 503).length,
    unavailableWithoutRetryAfter: window.filter((s) => s.status === 503 && !s.retryAfter).length,
    hangs: window.filter((s) => s.status === 0 || s.ms > o.hangMs).length,
    slowestMs: Math.max(0, ...window.map((s) => s.ms)),
    inFlightAtFault: { requests: inFlight.length, statuses: count(inFlight), slowestMs: Math.max(0, ...inFlight.map((s) => s.ms)) },
    whileAway: {
      requests: away.length,
      statuses: count(away),
      unavailable: away503.length,
      slowest503Ms: Math.max(0, ...away503.map((s) => s.ms)),
      over1s503: away503.filter((s) => s.ms > 1000).length,
    },
    recoveryMs: ok ? end(ok) - o.faultAt : null,
    recoveryAfterBackMs: okBack && o.backAt !== undefined ? end(okBack) - o.backAt : null,
  };
}
