/** The dedupe wing's settings (`config.dedupe`), composed into the configuration by its manifest. */
import { s, type WingSettingGroup } from '../../platform/config.js';

export const DEDUPE_SETTINGS = {
  threshold: s({
    env: 'DEDUPE_THRESHOLD',
    kind: 'number',
    default: 0.6,
    min: -1,
    max: 1,
    doc: "Cosine at or above which a link's face found under another live account is a `duplicate` (1:N against everyone enrolled, and the watch-list). Set it for your population: FPIR ≈ N × FMR (docs/dedupe.md, docs/evaluation.md).",
  }),
  reviewThreshold: s({
    env: 'DEDUPE_REVIEW_THRESHOLD',
    kind: 'number',
    default: 0.45,
    min: -1,
    max: 1,
    doc: "Cosine from which (up to DEDUPE_THRESHOLD) a link's face found under another live account is a `possible_duplicate`, a case for review that never blocks (docs/dedupe.md).",
  }),
  policy: s({
    env: 'DEDUPE_POLICY',
    kind: 'string',
    default: 'flag-and-continue',
    enum: ['flag-and-continue', 'hard-block'] as const,
    doc: '`flag-and-continue`: a link whose face is a duplicate or on the watch-list links and opens a case; `hard-block`: it answers 422 `duplicate_identity`, links nothing and opens a case (a `possible_duplicate` never blocks).',
  }),
  captureRetentionDays: s({
    env: 'DEDUPE_CAPTURE_RETENTION_DAYS',
    kind: 'int',
    default: 30,
    min: 0,
    doc: 'Days a decided duplicate-identity case keeps its sealed live capture for the record; then the capture is deleted (the case stays).',
  }),
} as const;

declare module '../../platform/config.js' {
  interface WingSettings {
    dedupe: typeof DEDUPE_SETTINGS;
  }
}

export const dedupeSettingGroups: Record<string, WingSettingGroup> = {
  dedupe: {
    title: 'Duplicate identities',
    settings: DEDUPE_SETTINGS,
    check({ dedupe }, problems) {
      if (dedupe.reviewThreshold > dedupe.threshold)
        problems.push('DEDUPE_REVIEW_THRESHOLD must not be above DEDUPE_THRESHOLD (the review band lies below the duplicate band)');
    },
  },
};
