/**
 * Index snapshots in a directory (SEARCH_SNAPSHOT_DIR; engine-neutral: the engine writes its files,
 * this module names, checks and retires them).
 *
 * A snapshot is a directory `snap-<logId>-<seq>-<random>/` holding the engine's files and `meta.json`
 * (written last): the change-log lineage (`logId`), the seq the index reflects, the engine's key and
 * metadata, the snapshot's random id its sealed files are bound to, and the size of every file. It is written under `.tmp-*` and renamed into
 * place, so a reader never sees a half-written snapshot; a reader checks every size before using one
 * and every sealed frame authenticates as it is decrypted, so a damaged snapshot is skipped (the replica then takes an older one or builds in full),
 * never loaded.
 *
 * Private and sealed: the directory (and each snapshot's) is 0700 and every file 0600, and every
 * engine file is encrypted under the biometric key ring (sealed-snapshot-files.ts; the associated data
 * binds it to this snapshot's random id and its name), since a snapshot holds every enrolled user's
 * template and id (docs/data-protection.md). A snapshot written in clear by an older version
 * (format 1), or sealed by an older version (formats 2 and 3), is never loaded and is deleted when
 * snapshots are retired (a snapshot is a cache of PostgreSQL: the replica builds in full instead).
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { KeyRing } from '../../../platform/keys/key-ring.js';
import { SealedSnapshotFiles } from './sealed-snapshot-files.js';

/**
 * 1: engine files in clear; 2: sealed under a ring key itself; 3: every file sealed in 4 MiB frames
 * (the vectors decrypted in bulk into memory at open). All three are refused and retired (the replica
 * builds in full). 4: the re-rank vectors sealed row by row (mapped, decrypted per re-ranked row), the
 * other files in frames.
 */
export const SEALED_FORMAT = 4;

export interface SnapshotMeta {
  format: 1 | 2 | 3 | 4;
  /** The random id the sealed files are bound to (formats 2 to 4). */
  id?: string;
  logId: string;
  seq: string;
  engineKey: string;
  rows: number;
  createdAt: string;
  /** Every file's size (format 1 also recorded a SHA-256; a sealed file authenticates itself). */
  files: Record<string, { bytes: number; sha256?: string }>;
  engineMeta: unknown;
}

export interface Snapshot {
  dir: string;
  meta: SnapshotMeta;
}

/** A snapshot being written: its temporary directory and the sealed files an engine writes into. */
export interface SnapshotDraft {
  dir: string;
  id: string;
  files: SealedSnapshotFiles;
}

export class SnapshotStore {
  constructor(
    readonly dir: string,
    private readonly ring: KeyRing,
  ) {}

  /** A fresh temporary directory for an engine to write into, with the id its files are sealed to. */
  async begin(): Promise<SnapshotDraft> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await chmod(this.dir, 0o700); // an existing directory made before snapshots were private
    const id = randomBytes(16).toString('hex');
    const tmp = path.join(this.dir, `.tmp-${Date.now()}-${id.slice(0, 8)}`);
    await mkdir(tmp, { mode: 0o700 });
    return { dir: tmp, id, files: new SealedSnapshotFiles(tmp, id, this.ring) };
  }

  async abort(draft: SnapshotDraft): Promise<void> {
    await rm(draft.dir, { recursive: true, force: true });
  }

  /** The decrypting reader of a (verified) snapshot's files; throws for a snapshot written in clear. */
  reader(s: Snapshot): SealedSnapshotFiles {
    if (s.meta.format !== SEALED_FORMAT || !s.meta.id) throw new Error('written by an older version (never loaded; retired)');
    return new SealedSnapshotFiles(s.dir, s.meta.id, this.ring);
  }

  /** Hashes the files in the draft, writes meta.json, and renames the directory into place. */
  async commit(draft: SnapshotDraft, m: Omit<SnapshotMeta, 'format' | 'id' | 'files' | 'createdAt'>): Promise<Snapshot> {
    const tmp = draft.dir;
    const files: SnapshotMeta['files'] = {};
    for (const name of (await readdir(tmp)).sort()) {
      const file = path.join(tmp, name);
      files[name] = { bytes: (await stat(file)).size };
      await chmod(file, 0o600);
      const fh = await open(file, 'r+');
      await fh.sync();
      await fh.close();
    }
    const meta: SnapshotMeta = { format: SEALED_FORMAT, id: draft.id, ...m, createdAt: new Date().toISOString(), files };
    await writeFile(path.join(tmp, 'meta.json'), JSON.stringify(meta), { mode: 0o600 });
    const dir = path.join(this.dir, `snap-${m.logId}-${m.seq.padStart(20, '0')}-${randomBytes(4).toString('hex')}`);
    await rename(tmp, dir);
    return { dir, meta };
  }

  /** Snapshots of this lineage and engine, newest first (meta.json readable; files not yet checked). */
  async list(logId: string, engineKey: string): Promise<Snapshot[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return [];
    }
    const out: Snapshot[] = [];
    for (const name of names) {
      if (!name.startsWith(`snap-${logId}-`)) continue;
      const dir = path.join(this.dir, name);
      try {
        const meta = JSON.parse(await readFile(path.join(dir, 'meta.json'), 'utf8')) as SnapshotMeta;
        if (![1, 2, 3, SEALED_FORMAT].includes(meta.format) || meta.logId !== logId || meta.engineKey !== engineKey || !/^\d+$/.test(meta.seq)) continue;
        out.push({ dir, meta });
      } catch {
        // no or unreadable meta.json: not a snapshot (verify() would refuse it anyway)
      }
    }
    return out.sort((a, b) => (BigInt(b.meta.seq) > BigInt(a.meta.seq) ? 1 : BigInt(b.meta.seq) < BigInt(a.meta.seq) ? -1 : 0));
  }

  /**
   * A sealed snapshot with every file present at its recorded size. Contents are not hashed: a sealed
   * file authenticates frame by frame as it is decrypted (AES-GCM, bound to this snapshot, the file and
   * the frame's position), so hashing it first would read it twice.
   */
  async verify(s: Snapshot): Promise<string | null> {
    if (s.meta.format !== SEALED_FORMAT || !s.meta.id)
      return 'written by an older version, in clear or in an older sealed format (never loaded; retired: a full build replaces it)';
    for (const [name, f] of Object.entries(s.meta.files)) {
      let size: number;
      try {
        size = (await stat(path.join(s.dir, name))).size;
      } catch {
        return `${name} is missing`;
      }
      if (size !== f.bytes) return `${name} has ${size} bytes, expected ${f.bytes}`;
    }
    return null;
  }

  /**
   * Removes all but the newest `keep` sealed snapshots of this lineage and engine, and every one
   * written in clear (never those in `inUse`).
   */
  async retire(logId: string, engineKey: string, keep: number, inUse: ReadonlySet<string>): Promise<number> {
    const all = await this.list(logId, engineKey);
    const sealed = all.filter((s) => s.meta.format === SEALED_FORMAT);
    const retired = [...sealed.slice(keep), ...all.filter((s) => s.meta.format !== SEALED_FORMAT)];
    let removed = 0;
    for (const s of retired) {
      if (inUse.has(s.dir)) continue;
      await rm(s.dir, { recursive: true, force: true });
      removed++;
    }
    return removed;
  }
}
