/**
 * The advisory capture quality answered by verify-face, /verify/self and /identify (SPEC 11), from
 * the one list of issue codes in shared/face-quality.ts. Additive: it never changes an outcome, a
 * status or an error code.
 */
import { Type } from '@sinclair/typebox';
import { QUALITY_ADVICE, QUALITY_ISSUES } from '../../platform/face/quality.js';

export const QualityIssueCode = Type.Union(
  QUALITY_ISSUES.map((code) => Type.Literal(code, { description: QUALITY_ADVICE[code] })),
  { description: 'A capture-quality issue: ' + QUALITY_ISSUES.map((c) => `\`${c}\` (${QUALITY_ADVICE[c]})`).join('; ') },
);

export const QualityBody = Type.Object(
  {
    score: Type.Integer({ minimum: 0, maximum: 100, description: 'Capture quality 0..100, higher is better; below 50 exactly when `issues` is not empty' }),
    issues: Type.Array(QualityIssueCode, { description: 'What to change, in a fixed order; empty for a good capture' }),
  },
  {
    description:
      'Advisory capture quality of the face used (ISO/IEC 29794-5-style measures: face size, face cut by the frame, pose, eyes visible, sharpness, exposure, contrast; docs/face-engine.md). It never changes the outcome.',
  },
);

/**
 * `quality` on a face answer: that of the face used; on `no_face`, that of the whole photo, whose only
 * possible issues are `too_dark`, `too_bright` and `blurred` (what kept the face from being found);
 * null when several faces were refused or the engine did not measure it.
 */
export const QualityField = Type.Union([QualityBody, Type.Null()], {
  description:
    'Capture quality of the face used. On `no_face`, that of the whole photo: `too_dark`, `too_bright` or `blurred` when that is why no face was found, else no issue. Null when the engine did not measure it (or several faces were refused).',
});
