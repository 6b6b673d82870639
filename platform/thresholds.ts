/**
 * Face decision thresholds calibrated on the project's own labelled photos (test/fixtures/faces) with
 * the face engine of platform/face/face-models.ts (FACE_ENGINE_VERSION). The figures that chose them, the
 * rules, and what those figures can and cannot claim: docs/face-engine.md; recompute with
 * `npx tsx scripts/calibrate.ts`. The config module uses these as defaults, overridable by the
 * environment (MATCH_THRESHOLD, HIGH_CONFIDENCE_THRESHOLD, LIVENESS_THRESHOLD, LIVENESS_SESSION_THRESHOLD).
 *
 * - match (cosine of L2-normalised embeddings, at or above = match): 0.45. Highest impostor pair 0.349
 *   (156 pairs), lowest genuine pair 0.514 (6 pairs of different LFW photos of one person).
 * - highConfidence (cosine at or above which /verify/self refreshes the canonical embedding): 0.70,
 *   above 5 of the 6 genuine pairs (75th percentile 0.680) and 0.35 above the highest impostor.
 * - liveness (probability of the live class; below = liveness_failed): 0.50. The face chosen in every
 *   live fixture photo scores at least 0.624. No real spoof photo was available: see the doc.
 */
/*
 * - livenessSession (a liveness session's median passive score over the frames seen at a step; below =
 *   spoof_suspected): 0.18. Set on real webcam footage (the 5 % quantile of the three-frame sessions'
 *   medians on the worse tuning clip, 0.188): docs/face-engine.md "Liveness on real footage".
 */
export const CALIBRATED_THRESHOLDS = { match: 0.45, highConfidence: 0.7, liveness: 0.5, livenessSession: 0.18 } as const;
