/**
 * A snapshot's re-rank vectors sealed row by row (docs/vector-index.md, docs/data-protection.md), so
 * that the file can be memory-mapped: the page cache holds only ciphertext (shared by every replica on
 * the machine, evictable), and a search decrypts only the rows it re-ranks (native:
 * native/search-kernel/src/sealed-rows.cc, the key ring's one native counterpart).
 *
 * Layout: a header of HEADER_BYTES (`FIDROWS1`, u32 LE layout version 1, u32 LE dimension d, u8 length
 * of the ring key id, the key id, zeros), then one record per row, `nonce (12) | tag (16) |
 * AES-256-GCM(d float32 LE)` — a record is the key ring's sealed blob (platform/keys/sealed-format.ts)
 * without its version and key id bytes, which the header carries once.
 *
 * Key: the snapshot's own row key, `saltedKey('snapshots', "search-snapshot-rows:<id>")` of the ring
 * key the header names (HKDF purpose key, then HMAC with the snapshot id: each snapshot has its own key,
 * so random nonces stay far below GCM's limit per key even at 100M rows). Associated data:
 * `snapshots ‖ 0x00 ‖ search-snapshot:<id>/<file>#<row>:<hex of the row's 16-byte user id>`: a row
 * authenticates only at its position, in its snapshot, for its user.
 */
import { closeSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import { KeyRing, KeyRingError } from '../../../platform/keys/key-ring.js';
import { openRow, sealRows, sealedRowOverhead } from './search-kernel.js';
import { uuidBytes } from './id-table.js';

export const ROWS_MAGIC = Buffer.from('FIDROWS1', 'latin1');
export const ROWS_LAYOUT = 1;
export const HEADER_BYTES = 128;

export class SealedRowsError extends Error {}

/** The snapshot's row key under ring key `keyId` (32 bytes; handed to the native store, never stored or logged). */
export function snapshotRowKey(ring: KeyRing, snapshotId: string, keyId: string): Buffer {
  return ring.saltedKey('snapshots', Buffer.from(`search-snapshot-rows:${snapshotId}`, 'utf8'), keyId);
}

/** The associated data every row of `name` in snapshot `snapshotId` begins with (the row and id follow). */
export function rowsAssociatedData(snapshotId: string, name: string): Buffer {
  return KeyRing.associatedData('snapshots', `search-snapshot:${snapshotId}/${name}#`);
}

/** Bytes of one record of a d-dimensional row. */
export const recordBytes = (d: number) => sealedRowOverhead + 4 * d;

function header(d: number, keyId: string): Buffer {
  const kid = Buffer.from(keyId, 'utf8');
  if (kid.length < 1 || kid.length > HEADER_BYTES - 17) throw new SealedRowsError('key id too long for the header');
  const h = Buffer.alloc(HEADER_BYTES);
  ROWS_MAGIC.copy(h, 0);
  h.writeUInt32LE(ROWS_LAYOUT, 8);
  h.writeUInt32LE(d, 12);
  h.writeUInt8(kid.length, 16);
  kid.copy(h, 17);
  return h;
}

/** Writes rows in order (synchronous: the engine adds rows synchronously). */
export class SealedRowsWriter {
  private readonly fd: number;
  private readonly key: Buffer;
  private readonly ad: Buffer;
  private rows = 0;
  private closed = false;

  constructor(
    private readonly file: string,
    snapshotId: string,
    name: string,
    ring: KeyRing,
    private readonly d: number,
  ) {
    this.key = snapshotRowKey(ring, snapshotId, ring.activeKeyId);
    this.ad = rowsAssociatedData(snapshotId, name);
    this.fd = openSync(file, 'wx', 0o600);
    this.put(header(d, ring.activeKeyId));
  }

  /** Appends rows (`vectors`: m × d float32) of the users `ids` (m × 16 bytes). */
  write(vectors: Float32Array, ids: Uint8Array): void {
    if (this.closed) throw new SealedRowsError('the rows file is closed');
    const m = vectors.length / this.d;
    if (m === 0) return;
    this.put(sealRows(this.key, this.ad, this.rows, ids, vectors, this.d));
    this.rows += m;
  }

  get written(): number {
    return this.rows;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.key.fill(0);
    closeSync(this.fd);
  }

  abort(): void {
    this.close();
    rmSync(this.file, { force: true });
  }

  private put(bytes: Uint8Array): void {
    for (let o = 0; o < bytes.length;) o += writeSync(this.fd, bytes, o, bytes.length - o);
  }
}

/** What the native store needs to read a rows file (its header checked; the key of the ring key it names). */
export interface SealedRowsAccess {
  key: Buffer;
  associatedData: Buffer;
  headerBytes: number;
}

/** Reads and checks the header of `file`; throws SealedRowsError (layout) or KeyRingError (a key the ring lacks). */
export function openRowsFile(file: string, snapshotId: string, name: string, ring: KeyRing, d: number): SealedRowsAccess {
  const h = Buffer.alloc(HEADER_BYTES);
  const fd = openSync(file, 'r');
  try {
    if (readSync(fd, h, 0, HEADER_BYTES, 0) !== HEADER_BYTES) throw new SealedRowsError(`${name} is truncated`);
  } finally {
    closeSync(fd);
  }
  if (!h.subarray(0, 8).equals(ROWS_MAGIC) || h.readUInt32LE(8) !== ROWS_LAYOUT) throw new SealedRowsError(`${name} is not a sealed rows file`);
  if (h.readUInt32LE(12) !== d) throw new SealedRowsError(`${name} holds rows of another dimension`);
  const kid = h.toString('utf8', 17, 17 + h.readUInt8(16));
  if (!ring.keyIds.includes(kid)) throw new KeyRingError(`no key ${kid} in the ring (was it dropped before every value was re-sealed?)`);
  return { key: snapshotRowKey(ring, snapshotId, kid), associatedData: rowsAssociatedData(snapshotId, name), headerBytes: HEADER_BYTES };
}

/**
 * Row `row` of a rows file opened for user `userId` on its own, or null when it does not authenticate
 * for that position and user (checks of what a snapshot holds: an erased user's row opens nowhere).
 */
export function openRowFor(file: string, access: SealedRowsAccess, d: number, row: number, userId: string): Float32Array | null {
  const record = Buffer.alloc(recordBytes(d));
  const fd = openSync(file, 'r');
  try {
    if (readSync(fd, record, 0, record.length, access.headerBytes + row * record.length) !== record.length) return null;
  } finally {
    closeSync(fd);
  }
  const ad = Buffer.concat([access.associatedData, Buffer.from(`${row}:${Buffer.from(uuidBytes(userId)).toString('hex')}`, 'utf8')]);
  return openRow(access.key, ad, record, d);
}
