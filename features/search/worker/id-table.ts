/**
 * The user ids of an index's rows, compactly: 16 bytes per row position (the UUID's bytes) in typed
 * arrays, a liveness flag per position, and an open-addressing hash index from id to position. About
 * 25 bytes per row instead of ~130 for a `Map` of strings and an array (at 10M: 0.25 GB instead of
 * 1.3 GB), none of it in the garbage-collected heap. User ids are UUIDs (the `users.id` column).
 *
 * Positions are stable: rows are only appended, a removal clears the live flag (the bytes stay, as the
 * sealed re-rank rows of a snapshot are bound to them).
 */

const EMPTY = -1;
const DELETED = -2;
const UUID = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

export class IdTableError extends RangeError {}

/** The 16 bytes of a UUID (with or without dashes, any case) into `out` at `at`. */
export function uuidBytes(userId: string, out: Uint8Array = new Uint8Array(16), at = 0): Uint8Array {
  if (!UUID.test(userId)) throw new IdTableError('a user id of the index is not a UUID');
  const hex = userId.length === 36 ? userId.replace(/-/g, '') : userId;
  for (let i = 0; i < 16; i++) out[at + i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** The canonical (lowercase, dashed) UUID of 16 bytes at `at`. */
export function uuidString(b: Uint8Array, at = 0): string {
  let s = '';
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) s += '-';
    s += HEX[b[at + i]!];
  }
  return s;
}

export class IdTable {
  /** Positions [0, baseRows): the snapshot's ids, never rewritten (the native store reads them). */
  private readonly base: Uint8Array;
  private readonly baseRows: number;
  /** Positions appended since, 16 bytes each (grown by doubling). */
  private extra = new Uint8Array(0);
  private count: number;
  private live: Uint8Array;
  private liveCount = 0;
  private slots: Int32Array;
  /** Slots not EMPTY (live entries and DELETED markers). */
  private usedSlots = 0;
  private readonly probe = new Uint8Array(16);

  /** A table whose first positions hold `base` (16 bytes per row, all live; ids must be distinct). */
  constructor(base: Uint8Array = new Uint8Array(0)) {
    if (base.length % 16) throw new IdTableError('ids of 16 bytes each');
    this.base = base;
    this.baseRows = base.length / 16;
    this.count = this.baseRows;
    this.live = new Uint8Array(Math.max(16, this.count));
    this.slots = new Int32Array(IdTable.capacityFor(this.count)).fill(EMPTY);
    for (let p = 0; p < this.count; p++) {
      if (this.find(this.base, p * 16) >= 0) throw new IdTableError('the snapshot names a user twice');
      this.live[p] = 1;
      this.liveCount++;
      this.insertSlot(p);
    }
  }

  private static capacityFor(n: number): number {
    let c = 16;
    while (c < n * 2) c *= 2;
    return c;
  }

  /** Row positions ever added. */
  get length(): number {
    return this.count;
  }
  /** Live users. */
  get size(): number {
    return this.liveCount;
  }

  /** The snapshot's ids (the native store binds each sealed row to its id). */
  get baseIds(): Uint8Array {
    return this.base;
  }

  private keys(p: number): Uint8Array {
    return p < this.baseRows ? this.base : this.extra;
  }
  private offset(p: number): number {
    return p < this.baseRows ? p * 16 : (p - this.baseRows) * 16;
  }

  private static hash(b: Uint8Array, o: number): number {
    let h =
      (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) ^
      Math.imul(b[o + 8]! | (b[o + 9]! << 8) | (b[o + 10]! << 16) | (b[o + 11]! << 24), 0x9e3779b1);
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    return (h ^ (h >>> 16)) >>> 0;
  }

  private static same(a: Uint8Array, ao: number, b: Uint8Array, bo: number): boolean {
    for (let i = 0; i < 16; i++) if (a[ao + i] !== b[bo + i]) return false;
    return true;
  }

  /** The live position holding the id at key[o..o+16), or -1. */
  private find(key: Uint8Array, o: number): number {
    const mask = this.slots.length - 1;
    for (let i = IdTable.hash(key, o) & mask; ; i = (i + 1) & mask) {
      const p = this.slots[i]!;
      if (p === EMPTY) return -1;
      if (p >= 0 && IdTable.same(this.keys(p), this.offset(p), key, o)) return p;
    }
  }

  private insertSlot(p: number): void {
    const mask = this.slots.length - 1;
    for (let i = IdTable.hash(this.keys(p), this.offset(p)) & mask; ; i = (i + 1) & mask) {
      const s = this.slots[i]!;
      if (s === EMPTY || s === DELETED) {
        if (s === EMPTY) this.usedSlots++;
        this.slots[i] = p;
        return;
      }
    }
  }

  private removeSlot(p: number): void {
    const mask = this.slots.length - 1;
    for (let i = IdTable.hash(this.keys(p), this.offset(p)) & mask; ; i = (i + 1) & mask) {
      const s = this.slots[i]!;
      if (s === EMPTY) return;
      if (s === p) {
        this.slots[i] = DELETED;
        return;
      }
    }
  }

  private rehashIfFull(): void {
    if ((this.usedSlots + 1) * 10 < this.slots.length * 7) return;
    this.slots = new Int32Array(IdTable.capacityFor(Math.max(this.liveCount + 1, 8))).fill(EMPTY);
    this.usedSlots = 0;
    for (let p = 0; p < this.count; p++) if (this.live[p]) this.insertSlot(p);
  }

  /** The live position of `userId`, or -1. */
  position(userId: string): number {
    return this.find(uuidBytes(userId, this.probe), 0);
  }

  /** The user at `p`, or null (dead, or out of range). */
  userAt(p: number): string | null {
    if (p < 0 || p >= this.count || !this.live[p]) return null;
    return uuidString(this.keys(p), this.offset(p));
  }

  isLive(p: number): boolean {
    return p >= 0 && p < this.count && this.live[p] === 1;
  }

  /** The 16 id bytes of position `p` (live or not). */
  idBytes(p: number): Uint8Array {
    const o = this.offset(p);
    return this.keys(p).subarray(o, o + 16);
  }

  /** Appends `userId` as a new live position (the caller has buried its previous one). */
  add(userId: string): number {
    uuidBytes(userId, this.probe);
    if (this.find(this.probe, 0) >= 0) throw new IdTableError('a user is live at another position');
    const p = this.count;
    const need = (p - this.baseRows + 1) * 16;
    if (need > this.extra.length) {
      const grown = new Uint8Array(Math.max(need, this.extra.length * 2, 16 * 1024));
      grown.set(this.extra);
      this.extra = grown;
    }
    this.extra.set(this.probe, (p - this.baseRows) * 16);
    if (p >= this.live.length) {
      const grown = new Uint8Array(Math.max(p + 1, this.live.length * 2));
      grown.set(this.live);
      this.live = grown;
    }
    this.rehashIfFull(); // before p is live: a rehash re-inserts every live position
    this.count++;
    this.live[p] = 1;
    this.liveCount++;
    this.insertSlot(p);
    return p;
  }

  /** Marks position `p` dead; returns whether it was live. */
  bury(p: number): boolean {
    if (!this.isLive(p)) return false;
    this.removeSlot(p);
    this.live[p] = 0;
    this.liveCount--;
    return true;
  }

  /** A copy of the live flags of positions [0, rows) (a frozen state's view). */
  liveFlags(rows: number): Uint8Array {
    return this.live.slice(0, rows);
  }

  /** Memory held, in bytes. */
  memoryBytes(): number {
    return this.base.byteLength + this.extra.byteLength + this.live.byteLength + this.slots.byteLength;
  }
}

/** A table of these users at positions 0.. (benchmarks and tools that assemble an engine from parts). */
export function idTableOf(userIds: readonly string[]): IdTable {
  const bytes = new Uint8Array(userIds.length * 16);
  userIds.forEach((id, i) => uuidBytes(id, bytes, i * 16));
  return new IdTable(bytes);
}
