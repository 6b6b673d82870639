/**
 * When a /verify/self match may replace the canonical embedding — the record every later 1:N search
 * compares against (docs/face-engine.md, "Capture quality").
 *
 * The interface document refreshes it on every high-confidence match, "so that the searchable record
 * reflects the most recent proven appearance". A high-confidence match says the capture is the
 * person; it does not say the capture is a good picture of them, and a dark or blurred capture that
 * still matches would make every later search against this person weaker. So, on top of the
 * high-confidence rule:
 *
 * - a capture whose quality score is at least CANONICAL_REFRESH_MIN_QUALITY (the floor, default 50 =
 *   no quality issue) always refreshes: the most recent good appearance wins;
 * - below the floor, it refreshes only when it is not worse than the stored capture's score;
 * - a stored embedding of unknown quality (written before quality was measured) only gives way to a
 *   capture at or above the floor;
 * - a capture whose quality was not measured (a face worker of an older version) keeps the
 *   document's behaviour: it refreshes.
 */

export type CanonicalRefreshReason =
  | 'below_high_confidence'
  | 'quality_at_or_above_floor'
  | 'quality_not_worse_than_stored'
  | 'quality_below_floor_and_stored'
  | 'quality_below_floor'
  | 'quality_not_measured';

export interface CanonicalRefreshDecision {
  refreshed: boolean;
  reason: CanonicalRefreshReason;
}

export function decideCanonicalRefresh(input: {
  score: number;
  highConfidenceThreshold: number;
  /** Quality score (0..100) of the new capture; null when not measured. */
  newQuality: number | null;
  /** Quality score of the capture behind the stored canonical embedding; null when unknown. */
  storedQuality: number | null;
  /** CANONICAL_REFRESH_MIN_QUALITY. */
  floor: number;
}): CanonicalRefreshDecision {
  const { score, highConfidenceThreshold, newQuality, storedQuality, floor } = input;
  if (!(score >= highConfidenceThreshold)) return { refreshed: false, reason: 'below_high_confidence' };
  if (newQuality === null) return { refreshed: true, reason: 'quality_not_measured' };
  if (newQuality >= floor) return { refreshed: true, reason: 'quality_at_or_above_floor' };
  if (storedQuality === null) return { refreshed: false, reason: 'quality_below_floor' };
  if (newQuality >= storedQuality) return { refreshed: true, reason: 'quality_not_worse_than_stored' };
  return { refreshed: false, reason: 'quality_below_floor_and_stored' };
}
