/**
 * Sealed snapshot files in frames (features/search/worker/sealed-snapshot-files.ts: a snapshot's codes
 * and ids): the plaintext back whole, and every damage refused (a flipped bit in any frame, frames
 * swapped, a missing last frame, a file of another snapshot, an unknown key, a length other than
 * expected). And the native store reading adopted rows in place. (The re-rank rows, sealed row by row:
 * test/sealed-rows.test.ts.)
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { KeyRing, KeyRingError } from '../platform/keys/key-ring.js';
import { FRAME_BYTES, SealedSnapshotFiles, SnapshotFileError } from '../features/search/worker/sealed-snapshot-files.js';
import { VectorStore } from '../features/search/worker/search-kernel.js';

const ring = (kid = 'k1') => KeyRing.from({ biometricKeys: `${kid}:${randomBytes(32).toString('base64')}`, biometricActiveKeyId: kid });
const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(path.join(os.tmpdir(), 'faceid-sealed-files-'));
  dirs.push(d);
  return d;
};
test.after.always(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Two full frames and a partial third (written in uneven pieces, as an engine writes rows). */
const PLAIN = randomBytes(2 * FRAME_BYTES + 123_456);
function sealedFile(keyRing = ring(), id = 'a'.repeat(32)) {
  const dir = tmp();
  const files = new SealedSnapshotFiles(dir, id, keyRing);
  const w = files.create('vectors.f32');
  for (let o = 0; o < PLAIN.length; o += 1_000_003) w.write(PLAIN.subarray(o, Math.min(PLAIN.length, o + 1_000_003)));
  w.close();
  return { dir, id, keyRing, files, file: path.join(dir, 'vectors.f32') };
}

/** The byte offsets of each frame's u32 length in a sealed file. */
function frameOffsets(file: string): number[] {
  const b = readFileSync(file);
  const at: number[] = [];
  for (let o = 8; o < b.length; o += 4 + b.readUInt32LE(o)) at.push(o);
  return at;
}

test('a file written in uneven pieces reads back whole, in frames', async (t) => {
  const { files } = sealedFile();
  t.is(frameOffsets(path.join(files.dir, 'vectors.f32')).length, 3);
  t.true((await files.read('vectors.f32', PLAIN.length)).equals(PLAIN));
  t.true((await files.read('vectors.f32')).equals(PLAIN));
});

test('a flipped bit in any frame, swapped frames, a missing last frame or another snapshot id is refused', async (t) => {
  for (const frame of [0, 1, 2]) {
    const { files, file } = sealedFile();
    const b = readFileSync(file);
    const at = frameOffsets(file)[frame]!;
    b[at + 4 + 200] ^= 0x10; // inside the ciphertext
    writeFileSync(file, b);
    await t.throwsAsync(files.read('vectors.f32', PLAIN.length), { instanceOf: KeyRingError }, `frame ${frame}`);
  }

  const swapped = sealedFile();
  const b = readFileSync(swapped.file);
  const [f0, f1, f2] = frameOffsets(swapped.file);
  writeFileSync(swapped.file, Buffer.concat([b.subarray(0, f0), b.subarray(f1!, f2), b.subarray(f0!, f1), b.subarray(f2!)]));
  await t.throwsAsync(swapped.files.read('vectors.f32', PLAIN.length), { instanceOf: KeyRingError });

  const cut = sealedFile();
  writeFileSync(cut.file, readFileSync(cut.file).subarray(0, frameOffsets(cut.file)[2]));
  await t.throwsAsync(cut.files.read('vectors.f32', PLAIN.length), { instanceOf: KeyRingError }, 'the frame before is not the last one');

  const moved = sealedFile();
  const elsewhere = new SealedSnapshotFiles(moved.dir, 'b'.repeat(32), moved.keyRing);
  await t.throwsAsync(elsewhere.read('vectors.f32', PLAIN.length), { instanceOf: KeyRingError });
});

test('an unknown key, a file in clear and a length other than expected are refused', async (t) => {
  const { dir, id, files } = sealedFile(ring('k1'));
  await t.throwsAsync(new SealedSnapshotFiles(dir, id, ring('k2')).read('vectors.f32', PLAIN.length), {
    instanceOf: KeyRingError,
    message: /no key k1/,
  });
  await t.throwsAsync(files.read('vectors.f32', PLAIN.length + 2048), { instanceOf: SnapshotFileError });
  await t.throwsAsync(files.read('vectors.f32', PLAIN.length - 2048), { instanceOf: SnapshotFileError });
  writeFileSync(path.join(dir, 'clear.f32'), PLAIN);
  await t.throwsAsync(files.read('clear.f32', PLAIN.length), { instanceOf: SnapshotFileError, message: /not a sealed snapshot file/ });
});

test('the native store reads adopted rows in place, appends after them, and refuses to adopt twice', (t) => {
  const d = 8;
  const rows = new Float32Array(new SharedArrayBuffer(3 * d * 4));
  rows.set([1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]);
  const store = new VectorStore(d, null, 0);
  store.adopt(rows);
  t.is(store.rows(), 3);
  t.is(store.append(Float32Array.from([0, 0, 0, 1, 0, 0, 0, 0])), 3);
  const q = Float32Array.from([0.5, 0, 1, 1, 0, 0, 0, 0]);
  t.deepEqual(Array.from(store.scores(q, Int32Array.from([0, 1, 2, 3]))), [0.5, 0, 1, 1]);
  t.is(store.overlayBytes(), 3 * d * 4 + d * 4, 'the adopted rows count as memory held');
  t.throws(() => store.adopt(rows), { message: /empty store/ });
  store.close();
  t.is(store.rows(), 0);
});
