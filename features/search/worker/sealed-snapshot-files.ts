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
 * frame beyond the plaintext the engine keeps. Used for the codes and ids, which a replica holds in
 * memory anyway; the re-rank vectors are sealed row by row instead (sealed-rows-file.ts), so that they
 * can be mapped.
 */
import { closeSync, openSync, rmSync, writeSync } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import type { KeyRing } from '../../../platform/keys/key-ring.js';
import { MAX_BLOB_OVERHEAD } from '../../../platform/keys/sealed-format.js';
import { openRowsFile, SealedRowsWriter, type SealedRowsAccess } from './sealed-rows-file.js';

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
  /** A file of re-rank rows, each sealed on its own (sealed-rows-file.ts). */
  createRows(name: string, d: number): SealedRowsWriter;
}

/** Where an engine reads a snapshot's files (small ones decrypted into memory; rows files mapped). */
export interface SnapshotReader {
  /** The file's plaintext; `expectedBytes` preallocates it (and refuses any other length). */
  read(name: string, expectedBytes?: number): Promise<Buffer>;
  /** A rows file's path and what the native store needs to map it (its header checked). */
  rowsFile(name: string, d: number): { file: string; access: SealedRowsAccess };
}

export class SnapshotFileError extends Error {}

const frameAdPrefix = (snapshotId: string, name: string) => `search-snapshot:${snapshotId}/${name}#`;
const frameAd = (snapshotId: string, name: string, index: number, last: boolean) => `${frameAdPrefix(snapshotId, name)}${index}${last ? ':last' : ''}`;

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

  createRows(name: string, d: number): SealedRowsWriter {
    return new SealedRowsWriter(path.join(this.dir, name), this.snapshotId, name, this.ring, d);
  }

  rowsFile(name: string, d: number): { file: string; access: SealedRowsAccess } {
    const file = path.join(this.dir, name);
    return { file, access: openRowsFile(file, this.snapshotId, name, this.ring, d) };
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
