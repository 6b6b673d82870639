/** The embedder runs under `all` graph optimisation because its denormal weights are flushed at load (SPEC 5). */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { flushDenormalWeights } from '../features/face/worker/pipeline/denormals.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MODELS = path.resolve(ROOT, process.env.FACE_MODELS_DIR ?? 'var/models');

test("fr_feature's denormal weights are all flushed to zero, and nothing else in the model changes", (t) => {
  const original = readFileSync(path.join(MODELS, 'fr_feature.onnx'));
  const flushed = Buffer.from(original);
  const count = flushDenormalWeights(flushed);
  t.true(count > 1000, `found ${count} denormal weights (SPEC 5: the embedder has them)`);
  t.is(flushDenormalWeights(Buffer.from(flushed)), 0, 'none left after one pass');
  t.is(flushed.length, original.length);
  // Only the denormals' own bytes moved, each to 0: at most 4 per weight (a denormal's top byte is 0 or 0x80 already).
  let changed = 0;
  let nonZero = 0;
  for (let p = 0; p < original.length; p++) {
    if (original[p] === flushed[p]) continue;
    changed++;
    if (flushed[p] !== 0) nonZero++;
  }
  t.is(nonZero, 0, 'every changed byte is now 0');
  t.true(changed >= count && changed <= 4 * count, `${changed} bytes changed for ${count} weights`);
});

test('models without denormal weights are left as they are', (t) => {
  for (const file of ['fr_detect.onnx', 'fr_liveness.onnx']) {
    const original = readFileSync(path.join(MODELS, file));
    const copy = Buffer.from(original);
    t.is(flushDenormalWeights(copy), 0, file);
    t.true(copy.equals(original), file);
  }
});

test('a truncated model is refused, not half-flushed silently', (t) => {
  const original = readFileSync(path.join(MODELS, 'fr_feature.onnx'));
  t.throws(() => flushDenormalWeights(Buffer.from(original.subarray(0, original.length - 1000))), { instanceOf: RangeError });
});
