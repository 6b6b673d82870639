/**
 * The single source of truth for the face engine's ONNX model files (SPEC section 5).
 *
 * The files come from the npm package `faceplugin-face-recognition-js@0.0.1` (under `package/model/`),
 * fetched with `npm pack` by `scripts/fetch-models.ts`, pinned here by SHA-256 and kept out of git
 * (they live in `var/models`, or `FACE_MODELS_DIR`). Changing a model means changing its hash here and
 * bumping FACE_ENGINE_VERSION, because stored embeddings are only comparable within one engine version.
 */

/** The npm package (name@version) that ships the model files. */
export const FACE_MODEL_PACKAGE = 'faceplugin-face-recognition-js@0.0.1';

/** Path of the model files inside the package tarball. */
export const FACE_MODEL_PACKAGE_DIR = 'package/model';

/**
 * Identifies the models plus the pre/post-processing pipeline that turns an image into an embedding.
 * Bump the `pipeline-N` part whenever alignment, normalisation or any step that changes embeddings changes.
 */
export const FACE_ENGINE_VERSION = 'faceplugin-0.0.1+pipeline-1';

/** Default models directory, relative to the project root (git-ignored). */
export const DEFAULT_FACE_MODELS_DIR = 'var/models';

export type FaceModelRole = 'detect' | 'landmark' | 'embed' | 'liveness';

export interface FaceModel {
  /** Short name used in code and logs. */
  readonly name: string;
  /** File name, both inside the package's `model/` folder and in the models directory. */
  readonly file: string;
  readonly role: FaceModelRole;
  /** Lower-case hex SHA-256 of the file as shipped in the package. */
  readonly sha256: string;
  /** Size in bytes of the file as shipped (a cheap first check before hashing). */
  readonly bytes: number;
  /** Name of the model's single input tensor. */
  readonly inputName: string;
  /** NCHW shape of the input tensor, float32. */
  readonly inputShape: readonly number[];
  /** Shapes of the output tensors, by name, as read from the model. */
  readonly outputs: Readonly<Record<string, readonly number[]>>;
}

export const FACE_MODELS = [
  {
    // UltraFace-style detector (RFB-320): 4420 priors, scores [bg, face], boxes in centre-size form.
    name: 'detect',
    file: 'fr_detect.onnx',
    role: 'detect',
    sha256: '6c0256ccd3164f844736a401faf936ec2930764a87ae39442180887d0c5c8854',
    bytes: 1217758,
    inputName: 'input',
    inputShape: [1, 3, 240, 320],
    outputs: { scores: [1, 4420, 2], boxes: [1, 4420, 4] },
  },
  {
    // 68-point landmarks on a 64x64 grey crop: 136 values (x0, y0, x1, y1, ...).
    name: 'landmark',
    file: 'fr_landmark.onnx',
    role: 'landmark',
    sha256: 'f10b0ba1d2a8a099adefede1ebf3733e44fe370715e7303dbeb7f59c02142258',
    bytes: 1163742,
    inputName: 'input',
    inputShape: [1, 1, 64, 64],
    outputs: { output: [1, 136] },
  },
  {
    // MobileFaceNet embedder on the ArcFace-aligned 112x112 crop: 512-d output (L2-normalise it).
    // Has denormal weights: use graph optimisation 'extended', not 'all' (SPEC section 5).
    name: 'feature',
    file: 'fr_feature.onnx',
    role: 'embed',
    sha256: '87aacdfe57510db2af90c0251df680e8eec88f122ee94712121d09bcaaaf3581',
    bytes: 4884269,
    inputName: 'input',
    inputShape: [1, 3, 112, 112],
    outputs: { output: [1, 512] },
  },
  {
    // MiniFASNet-style anti-spoofing on a 2.7x face crop resized to 128x128: 3 logits, class 0 = live.
    name: 'liveness',
    file: 'fr_liveness.onnx',
    role: 'liveness',
    sha256: 'afa783b7e902fdfcf323a7240cac2a1c580c25314ea4161129dc1b0d100dc32d',
    bytes: 1886811,
    inputName: 'input',
    inputShape: [1, 3, 128, 128],
    outputs: { output: [1, 3] },
  },
] as const satisfies readonly FaceModel[];

export type FaceModelName = (typeof FACE_MODELS)[number]['name'];

/** The model that plays `role` (there is exactly one per role). */
export function faceModelByRole(role: FaceModelRole): FaceModel {
  const model = FACE_MODELS.find((m) => m.role === role);
  if (!model) throw new Error(`no face model with role ${role}`);
  return model;
}
