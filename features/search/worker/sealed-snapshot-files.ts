/**
 * Snapshot files sealed at rest under the biometric key ring (docs/data-protection.md): a snapshot
 * holds every enrolled user's template and id, so no byte of it is written in clear.
 *
 * File layout: the magic `FIDSEAL1` (8 bytes), then frames `u32 LE length | sealed blob`; each blob
 * seals up to 4 MiB of the file for the `snapshots` purpose of the key ring (the one sealed format,
 * platform/keys/sealed-format.ts; the blob names its ring key, so a snapshot written before a rotation
 * is still read while the ring holds the old key). The subject of a frame is the snapshot's id, the
 * file name, the frame index and whether it is the last frame: a frame moved to another snapshot, file or position, reordered frames, a truncated file or a
 * flipped bit do not decrypt. Writing and reading go frame by frame, so memory stays bounded by one
 * frame beyond the plaintext the engine keeps.
 */
import { closeSync, openSync, rmSync, writeSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { KeyRing, KeyRingError } from '../../../platform/keys/key-ring.js';
import { MAX_BLOB_OVERHEAD, THREAD_OPEN_SOURCE } from '../../../platform/keys/sealed-format.js';

const MAGIC = Buffer.from('FIDSEAL1', 'latin1');
/** Plaintext bytes per frame. */
export const FRAME_BYTES = 4 << 20;

/** One file being written into a snapshot (synchronous writes: the sketch build adds rows synchronously). */
export interface SnapshotFileWriter {
  write(bytes: Uint8Array): void;
  /** Seals the last frame and closes the file. */
  close(): void;
  /** Closes and deletes the file. */
  abort(): void;
}

/** Where an engine writes a snapshot's files. */
export interface SnapshotWriter {
  create(name: string): SnapshotFileWriter;
  /** A whole small file at once. */
  writeFile(name: string, bytes: Uint8Array): void;
}

/** Where an engine reads a snapshot's files (decrypted into memory). */
export interface SnapshotReader {
  /** The file's plaintext; `expectedBytes` preallocates it (and refuses any other length). */
  read(name: string, expectedBytes?: number): Promise<Buffer>;
  /**
   * A large file's plaintext (of exactly `expectedBytes`), decrypted by several threads at once straight
   * into one shared buffer: the way a replica loads its vectors (the cipher and the first touch of the
   * memory both split over the cores, nothing copied twice).
   */
  readShared(name: string, expectedBytes: number): Promise<Uint8Array>;
}

export class SnapshotFileError extends Error {}

const frameAdPrefix = (snapshotId: string, name: string) => `search-snapshot:${snapshotId}/${name}#`;
const frameAd = (snapshotId: string, name: string, index: number, last: boolean) => `${frameAdPrefix(snapshotId, name)}${index}${last ? ':last' : ''}`;

/** Threads a parallel read uses: the cores, up to 4 (past that the memory bus, not the cipher, is the limit). */
const READ_THREADS = Math.max(1, Math.min(4, availableParallelism()));
/**
 * Below this a file is decrypted on the calling thread: starting the threads costs about 0.1 s, which
 * the split only wins back past about this size (0.7 ms per MB on one core here: docs/performance.md §6).
 */
export const PARALLEL_READ_MIN_BYTES = 128 << 20;

/**
 * One thread of `readShared` (plain CommonJS, run with `eval`: no loader to start, node: modules only).
 * Every thread walks the frame headers; thread `part` of `parts` decrypts frames index % parts === part
 * into `out` at index * frameBytes, with the key ring's primitive (`openSealedInto`, given the
 * `snapshots` data keys and the associated data of frameAd above).
 */
const READ_THREAD_SOURCE = `${THREAD_OPEN_SOURCE}
const { workerData, parentPort } = require('node:worker_threads');
const { openSync, readSync, fstatSync, closeSync } = require('node:fs');
const { file, shared, keys, adPrefix, part, parts, frameBytes, magic } = workerData;
const out = new Uint8Array(shared);
const fail = (kind, message) => Object.assign(new Error(message), { kind });
const readAll = (fd, buf, n, at) => { for (let o = 0; o < n;) { const r = readSync(fd, buf, o, n - o, at + o); if (r === 0) throw fail('file', 'truncated'); o += r; } };
const fd = openSync(file, 'r');
try {
  const size = fstatSync(fd).size;
  const head = Buffer.alloc(magic.length);
  readAll(fd, head, head.length, 0);
  if (!head.equals(Buffer.from(magic))) throw fail('file', 'is not a sealed snapshot file');
  const len = Buffer.alloc(4);
  const blob = Buffer.allocUnsafe(frameBytes + 512);
  let at = magic.length, end = null;
  for (let index = 0; ; index++) {
    if (at + 4 > size) throw fail('file', 'is truncated');
    readAll(fd, len, 4, at);
    const n = len.readUInt32LE(0);
    if (n > blob.length || at + 4 + n > size) throw fail('file', 'is truncated or damaged');
    const last = at + 4 + n === size;
    if (index % parts === part) {
      readAll(fd, blob, n, at + 4);
      const o = index * frameBytes;
      const got = openSealedInto(keys, blob, n, Buffer.from(adPrefix + index + (last ? ':last' : ''), 'utf8'), out, o, frameBytes);
      if (!last && got !== frameBytes) throw fail('file', 'is longer than expected or damaged');
      if (last) end = o + got;
    }
    at += 4 + n;
    if (last) break;
  }
  parentPort.postMessage({ end });
} catch (e) {
  parentPort.postMessage({ error: String(e && e.message), kind: (e && e.kind) || 'file' });
} finally {
  closeSync(fd);
}
`;

class SealedFileWriter implements SnapshotFileWriter {
  private readonly fd: number;
  private readonly frame = Buffer.allocUnsafe(FRAME_BYTES);
  private fill = 0;
  private index = 0;
  private closed = false;

  constructor(
    private readonly file: string,
    private readonly snapshotId: string,
    private readonly name: string,
    private readonly ring: KeyRing,
  ) {
    this.fd = openSync(file, 'wx', 0o600);
    this.put(MAGIC);
  }

  write(bytes: Uint8Array): void {
    if (this.closed) throw new Error(`${this.name} is closed`);
    for (let o = 0; o < bytes.length;) {
      const n = Math.min(bytes.length - o, FRAME_BYTES - this.fill);
      this.frame.set(bytes.subarray(o, o + n), this.fill);
      this.fill += n;
      o += n;
      if (this.fill === FRAME_BYTES) this.seal(false);
    }
  }

  close(): void {
    if (this.closed) return;
    this.seal(true); // always a last frame (possibly empty): a file cut at a frame boundary is refused
    this.closed = true;
    this.frame.fill(0);
    closeSync(this.fd);
  }

  abort(): void {
    if (!this.closed) closeSync(this.fd);
    this.closed = true;
    this.frame.fill(0);
    rmSync(this.file, { force: true });
  }

  private seal(last: boolean): void {
    const blob = this.ring.seal('snapshots', this.frame.subarray(0, this.fill), frameAd(this.snapshotId, this.name, this.index++, last));
    const length = Buffer.allocUnsafe(4);
    length.writeUInt32LE(blob.length);
    this.put(length);
    this.put(blob);
    this.fill = 0;
  }

  private put(bytes: Uint8Array): void {
    for (let o = 0; o < bytes.length;) o += writeSync(this.fd, bytes, o, bytes.length - o);
  }
}

/** The files of one snapshot (its directory and id), sealed under `ring`. */
export class SealedSnapshotFiles implements SnapshotWriter, SnapshotReader {
  constructor(
    readonly dir: string,
    readonly snapshotId: string,
    private readonly ring: KeyRing,
  ) {}

  create(name: string): SnapshotFileWriter {
    return new SealedFileWriter(path.join(this.dir, name), this.snapshotId, name, this.ring);
  }

  writeFile(name: string, bytes: Uint8Array): void {
    const w = this.create(name);
    try {
      w.write(bytes);
      w.close();
    } catch (e) {
      w.abort();
      throw e;
    }
  }

  /**
   * Throws SnapshotFileError (not sealed, truncated, wrong length) or KeyRingError (unknown key,
   * tampered). A frame authenticates only at its end, so the buffer is never returned (nor kept) when
   * any frame fails.
   */
  async readShared(name: string, expectedBytes: number, threads = expectedBytes >= PARALLEL_READ_MIN_BYTES ? READ_THREADS : 1): Promise<Uint8Array> {
    const shared = new SharedArrayBuffer(expectedBytes);
    if (threads <= 1) {
      const out = new Uint8Array(shared);
      out.set(await this.read(name, expectedBytes));
      return out;
    }
    const workerData = {
      file: path.join(this.dir, name),
      shared,
      keys: this.ring.dataKeysForThreads('snapshots'),
      // The associated data of a frame begins with that of its prefix (purpose ‖ 0x00 ‖ subject).
      adPrefix: KeyRing.associatedData('snapshots', frameAdPrefix(this.snapshotId, name)).toString('utf8'),
      parts: threads,
      frameBytes: FRAME_BYTES,
      magic: new Uint8Array(MAGIC),
    };
    const results = await Promise.all(
      Array.from(
        { length: threads },
        (_, part) =>
          new Promise<{ end?: number | null; error?: string; kind?: string }>((resolve, reject) => {
            const thread = new Worker(READ_THREAD_SOURCE, { eval: true, workerData: { ...workerData, part } });
            thread.once('message', resolve);
            thread.once('error', reject);
            thread.once('exit', (code) => reject(new SnapshotFileError(`${name}: a reading thread exited (${code}) without an answer`)));
          }),
      ),
    );
    const failed = results.find((r) => r.error !== undefined);
    if (failed) throw failed.kind === 'key' ? new KeyRingError(failed.error) : new SnapshotFileError(`${name} ${failed.error}`);
    const end = results.find((r) => r.end != null)?.end;
    if (end !== expectedBytes) throw new SnapshotFileError(`${name} has ${end ?? 'no last frame of'} bytes, expected ${expectedBytes}`);
    return new Uint8Array(shared);
  }

  /** Throws SnapshotFileError (not sealed, truncated, wrong length) or KeyRingError (unknown key, tampered). */
  async read(name: string, expectedBytes?: number): Promise<Buffer> {
    const fh = await open(path.join(this.dir, name), 'r');
    try {
      const size = (await fh.stat()).size;
      const head = Buffer.alloc(MAGIC.length);
      await fh.read(head, 0, head.length, 0);
      if (!head.equals(MAGIC)) throw new SnapshotFileError(`${name} is not a sealed snapshot file`);
      // A fresh ArrayBuffer (never a pooled slice): the vectors are viewed as float32, 4-byte aligned.
      const out = expectedBytes === undefined ? null : Buffer.from(new ArrayBuffer(expectedBytes));
      const parts: Buffer[] = [];
      const length = Buffer.alloc(4);
      const blob = Buffer.allocUnsafe(FRAME_BYTES + MAX_BLOB_OVERHEAD);
      let at = MAGIC.length,
        filled = 0;
      for (let index = 0; ; index++) {
        if (at + 4 > size) throw new SnapshotFileError(`${name} is truncated`);
        await fh.read(length, 0, 4, at);
        const n = length.readUInt32LE();
        if (n > blob.length || at + 4 + n > size) throw new SnapshotFileError(`${name} is truncated or damaged`);
        await fh.read(blob, 0, n, at + 4);
        at += 4 + n;
        const last = at === size;
        const plain = this.ring.open('snapshots', blob.subarray(0, n), frameAd(this.snapshotId, name, index, last));
        if (out) {
          if (filled + plain.length > out.length) throw new SnapshotFileError(`${name} is longer than ${expectedBytes} bytes`);
          plain.copy(out, filled);
        } else parts.push(plain);
        filled += plain.length;
        if (last) break;
      }
      if (out && filled !== out.length) throw new SnapshotFileError(`${name} has ${filled} bytes, expected ${expectedBytes}`);
      return out ?? Buffer.concat(parts);
    } finally {
      await fh.close();
    }
  }
}
