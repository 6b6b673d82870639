/**
 * The capture-quality contract shared by the face worker (which measures) and the API (which
 * answers it and stores its score). Process-neutral: no model, no image code here.
 *
 * The assessment is ADVISORY: it never changes an outcome, a status or an error code (SPEC 11). It
 * tells the person what to change, keeps poor captures out of the gallery (the /verify/self
 * refresh rule) and is logged with every search. The measures, their ranges and where each range
 * comes from: features/face/worker/pipeline/quality.ts and docs/face-engine.md ("Capture quality").
 */

/**
 * The fixed list of issue codes, in the order they are reported. Clients may rely on these strings
 * (the OpenAPI document lists them); a new code is an additive change.
 */
export const QUALITY_ISSUES = [
  'face_too_small',
  'face_cut_off',
  'not_frontal',
  'eyes_not_visible',
  'blurred',
  'too_dark',
  'too_bright',
  'low_contrast',
] as const;

export type QualityIssue = (typeof QUALITY_ISSUES)[number];

/** What each issue asks the person to do: the description of each code in the OpenAPI document (the console has its own translated wording). */
export const QUALITY_ADVICE: Record<QualityIssue, string> = {
  face_too_small: 'Move closer: your face is too small in the picture',
  face_cut_off: 'Keep your whole face inside the frame',
  not_frontal: 'Look straight at the camera and hold your head upright',
  eyes_not_visible: 'Keep your eyes open and uncovered (no sunglasses, hair or hand over them)',
  blurred: 'Hold still and make sure the camera is focused',
  too_dark: 'Find more light: your face is too dark',
  too_bright: 'Avoid direct light or glare on your face',
  low_contrast: 'Find even, brighter light: the face has too little contrast',
};

/** The raw measures, in their own units (documented in features/face/worker/pipeline/quality.ts). */
export interface QualityMeasures {
  /** Distance between the eye centres, in pixels of the normalised image. */
  interEyeDistancePx: number;
  /** Share (0..1) of the aligned face region the embedder sees that lies outside the photo. */
  outsideFrame: number;
  /** Head pose in degrees estimated from the 68 landmarks (0 = frontal, upright). */
  yawDeg: number;
  pitchDeg: number;
  rollDeg: number;
  /** Eyelid opening / inter-eye distance, the smaller of the two eyes. */
  eyeOpenness: number;
  /** Luminance standard deviation of the eye regions relative to the whole face region's (the smaller eye). */
  eyeContrast: number;
  /** Share (0..1) of an eye region darker than 0.35 x the face's mean luminance (the darker eye). */
  eyeDarkShare: number;
  /** High-frequency energy of the aligned face (variance of the Laplacian / luminance variance). */
  sharpness: number;
  /** Mean luminance (0..1) of the face region of the aligned face. */
  luminanceMean: number;
  /** Share (0..1) of face-region pixels with luminance <= 25 (OFIQ's dark range). */
  darkShare: number;
  /** Share (0..1) of face-region pixels with luminance >= 247 (OFIQ's bright range). */
  brightShare: number;
  /** Luminance standard deviation (0..1) of the face region. */
  luminanceSd: number;
}

export interface QualityAssessment {
  /** 0..100, higher is better: the score of the weakest measure; below 50 means at least one issue. */
  score: number;
  /** Issue codes from QUALITY_ISSUES, in that order; empty for a good capture. */
  issues: QualityIssue[];
  measures: QualityMeasures;
}

/** The advisory part every face response carries: `{ score, issues }`. */
export interface QualitySummary {
  score: number;
  issues: QualityIssue[];
}

export const qualitySummary = (q: QualitySummary | null | undefined): QualitySummary | null => (q ? { score: q.score, issues: [...q.issues] } : null);
