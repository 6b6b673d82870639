/**
 * The face wing's settings: matching and the face processes (`config.face`), and the biometric attempt
 * limits and live-capture bounds (`config.biometrics`) its attempt store enforces for every wing that
 * takes a selfie. Composed into the configuration by its manifest (docs/configuration.md is generated
 * from them).
 */
import { s, type Parsed, type WingSettingGroup } from '../../platform/config.js';
import { CALIBRATED_THRESHOLDS } from '../../platform/thresholds.js';

export const FACE_SETTINGS = {
  matchThreshold: s({
    env: 'MATCH_THRESHOLD',
    kind: 'number',
    default: CALIBRATED_THRESHOLDS.match,
    min: -1,
    max: 1,
    doc: 'Cosine at or above which two faces match (calibrated: docs/face-engine.md).',
  }),
  highConfidenceThreshold: s({
    env: 'HIGH_CONFIDENCE_THRESHOLD',
    kind: 'number',
    default: CALIBRATED_THRESHOLDS.highConfidence,
    min: -1,
    max: 1,
    doc: '/verify/self score at or above which the canonical embedding is refreshed.',
  }),
  livenessThreshold: s({
    env: 'LIVENESS_THRESHOLD',
    kind: 'number',
    default: CALIBRATED_THRESHOLDS.liveness,
    min: 0,
    max: 1,
    doc: 'Live probability below which a capture fails liveness.',
  }),
  livenessSessionThreshold: s({
    env: 'LIVENESS_SESSION_THRESHOLD',
    kind: 'number',
    default: CALIBRATED_THRESHOLDS.livenessSession,
    min: 0,
    max: 1,
    doc: 'A liveness session\'s passive score, the median over its frames seen at a step, below which it fails `spoof_suspected` (single frames of real people on webcams often score below LIVENESS_THRESHOLD; docs/face-engine.md "Liveness on real footage").',
  }),
  identifyMatchThreshold: s({
    env: 'IDENTIFY_MATCH_THRESHOLD',
    kind: 'number',
    default: (c: Parsed) => c.face?.matchThreshold,
    min: -1,
    max: 1,
    doc: 'Cosine at or above which /identify returns a candidate (1:N). Default: MATCH_THRESHOLD. A 1:N search compares the probe with everyone enrolled, so its false-positive rate grows with the gallery (FPIR ≈ 1 − (1 − FMR)^N): set it from your own data (docs/face-engine.md, "The 1:N threshold").',
  }),
  canonicalRefreshMinQuality: s({
    env: 'CANONICAL_REFRESH_MIN_QUALITY',
    kind: 'int',
    default: 50,
    min: 0,
    max: 100,
    doc: 'Capture quality score (0..100) at or above which a high-confidence /verify/self always refreshes the canonical embedding; below it, only when not worse than the stored capture\'s (docs/face-engine.md, "Capture quality").',
  }),
  identifyMaxCandidates: s({ env: 'IDENTIFY_MAX_CANDIDATES', kind: 'int', default: 5, min: 1, max: 100, doc: 'Most candidates /identify returns.' }),
  modelsDir: s({ env: 'FACE_MODELS_DIR', kind: 'string', default: 'var/models', doc: 'Directory of the four ONNX models (fetched by `npm run setup`).' }),
  intraOpThreads: s({ env: 'FACE_INTRA_OP_THREADS', kind: 'int', default: 1, min: 1, max: 64, doc: 'onnxruntime intra-op threads per face worker process.' }),
  processes: s({
    env: 'FACE_PROCESSES',
    kind: 'int',
    default: 2,
    min: 1,
    max: 64,
    doc: "`face` processes `npm start` runs (one per core: onnxruntime runs a model on the process's main thread, so a second process, not a second job slot, uses the second core; docs/performance.md). The first answers `/health` on FACE_ENGINE_PORT, the others on a free port each.",
  }),
  workerConcurrency: s({ env: 'FACE_WORKER_CONCURRENCY', kind: 'int', default: 1, min: 1, max: 64, doc: 'Jobs one face worker process runs at once.' }),
  enginePort: s({ env: 'FACE_ENGINE_PORT', kind: 'int', default: 3100, min: 0, max: 65535, doc: "Port of the face worker's own `/version` and `/health`." }),
  engineUrl: s({
    env: 'FACE_ENGINE_URL',
    kind: 'url',
    default: (c: Parsed) => `http://127.0.0.1:${c.face?.enginePort}`,
    doc: "Where the API reaches the face worker's `/version` and `/health`.",
  }),
  executionProvider: s({
    env: 'FACE_EXECUTION_PROVIDER',
    kind: 'string',
    default: 'cpu',
    enum: ['cpu', 'cuda'] as const,
    doc: 'onnxruntime execution provider of the face models. `cuda` runs them on an NVIDIA GPU when onnxruntime-node\'s CUDA provider and the CUDA runtime are installed (docs/face-engine.md, "GPU face workers"); when they are not, the face process logs why and runs on the CPU. Which one runs: the face process\'s `/version`, `/health` and `/metrics` (`faceid_face_execution_provider`).',
  }),
} as const;

export const BIOMETRIC_SETTINGS = {
  maxFailures: s({
    env: 'BIOMETRIC_MAX_FAILURES',
    kind: 'int',
    default: 5,
    min: 1,
    max: 100,
    doc: 'Consecutive failed biometric attempts of one user (`/verify/self` `no_match`/`liveness_failed`, verify-face `face_mismatch`/`liveness_failed`, across validation tokens) that lock their biometric routes (429 `biometric_locked`; NIST SP 800-63B 5.2.3). A match resets the count.',
  }),
  lockSeconds: s({
    env: 'BIOMETRIC_LOCK_SECONDS',
    kind: 'int',
    default: 30,
    min: 1,
    doc: 'First biometric lock; each further failure after a lock doubles it, up to BIOMETRIC_MAX_LOCK_SECONDS.',
  }),
  maxLockSeconds: s({
    env: 'BIOMETRIC_MAX_LOCK_SECONDS',
    kind: 'int',
    default: 86_400,
    min: 1,
    doc: 'Longest biometric lock (24 h); consecutive failures are also remembered this long after the last one.',
  }),
  selfieMaxPixels: s({
    env: 'SELFIE_MAX_PIXELS',
    kind: 'int',
    default: 16_777_216,
    min: 10_000,
    doc: "Largest live capture (pixels, from the image header, checked before decoding) on `/verify/self` and verify-face; beyond it 400 `invalid_image`. 16 MP holds a 12 MP phone still (4032×3024) and any front camera's selfie; the pipeline works on at most 1280 px, and decoding cost grows with pixels (a 40 MP image costs about a second of CPU and 150 MB in the web process), so a consumer cannot buy that with a small upload.",
  }),
} as const;

declare module '../../platform/config.js' {
  interface WingSettings {
    face: typeof FACE_SETTINGS;
    biometrics: typeof BIOMETRIC_SETTINGS;
  }
}

export const faceSettingGroups: Record<string, WingSettingGroup> = {
  face: {
    title: 'Face engine and matching',
    settings: FACE_SETTINGS,
    check({ face }, problems) {
      if (face.highConfidenceThreshold < face.matchThreshold) problems.push('HIGH_CONFIDENCE_THRESHOLD must be >= MATCH_THRESHOLD');
    },
  },
  biometrics: { title: 'Biometric attempt limits and live captures', settings: BIOMETRIC_SETTINGS },
};
