/**
 * A snapshot's re-rank rows sealed row by row (features/search/worker/sealed-rows-file.ts, native
 * native/search-kernel/src/sealed-rows.cc): the native records are the key ring's sealed format (a
 * record opens with the ring's `openBlob`, a blob sealed by the ring opens natively); the native store
 * maps the file and re-ranks exactly as over the same rows in clear; a flipped bit, two rows swapped, a
 * row moved from another snapshot or bound to another user are refused (at open, and by a search that
 * reads one); and two processes mapping one snapshot share its pages (file-backed, shared, not
 * anonymous memory: Pss, which charges a page to every process mapping it, is half the mapping's Rss).
 * A lazily mapped store (a file large next to RAM) asks the kernel for all of a search's candidate
 * rows at once before reading them: the same results, and the same refusals, with or without it.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { KeyRing } from '../platform/keys/key-ring.js';
import { openBlob, sealBlob, SEALED_VERSION } from '../platform/keys/sealed-format.js';
import { uuidBytes } from '../features/search/worker/id-table.js';
import { HEADER_BYTES, openRowsFile, recordBytes, SealedRowsWriter, snapshotRowKey, rowsAssociatedData } from '../features/search/worker/sealed-rows-file.js';
import { openRow, ROW_NOT_AUTHENTIC, sealRows, VectorStore } from '../features/search/worker/search-kernel.js';

const D = 512;
const ring = KeyRing.from({ biometricKeys: `k1:${randomBytes(32).toString('base64')}`, biometricActiveKeyId: 'k1' });
const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(path.join(os.tmpdir(), 'faceid-sealed-rows-'));
  dirs.push(d);
  return d;
};
test.after.always(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function unitRows(n: number, seed = 1): Float32Array {
  let s = seed;
  const x = new Float32Array(n * D);
  for (let r = 0; r < n; r++) {
    let ss = 0;
    for (let i = 0; i < D; i++) {
      s = (s * 1103515245 + 12345) % 2147483648;
      x[r * D + i] = s / 2147483648 - 0.5;
      ss += x[r * D + i]! ** 2;
    }
    for (let i = 0; i < D; i++) x[r * D + i]! /= Math.sqrt(ss);
  }
  return x;
}

/** A sealed rows file of `n` rows for snapshot `id` (users `users`), written in two pieces. */
function rowsFile(n: number, id = randomBytes(16).toString('hex'), users = Array.from({ length: n }, () => randomUUID()), seed = 1) {
  const dir = tmp();
  const file = path.join(dir, 'vectors.sealed');
  const x = unitRows(n, seed);
  const ids = new Uint8Array(n * 16);
  users.forEach((u, i) => uuidBytes(u, ids, i * 16));
  const w = new SealedRowsWriter(file, id, 'vectors.sealed', ring, D);
  const half = n >> 1;
  w.write(x.subarray(0, half * D), ids.subarray(0, half * 16));
  w.write(x.subarray(half * D), ids.subarray(half * 16));
  w.close();
  return { file, id, users, ids, x };
}

const open = (f: ReturnType<typeof rowsFile>, ids: Uint8Array = f.ids) =>
  new VectorStore(D, f.file, f.users.length, { ...openRowsFile(f.file, f.id, 'vectors.sealed', ring, D), ids });
const recordAt = (r: number) => HEADER_BYTES + r * recordBytes(D);

test('a native record is the key ring sealed format: it opens with openBlob, and a blob the ring seals opens natively', (t) => {
  const id = randomBytes(16).toString('hex');
  const key = snapshotRowKey(ring, id, 'k1');
  const user = randomUUID();
  const row = unitRows(1);
  const subject = `search-snapshot:${id}/vectors.sealed#7:${Buffer.from(uuidBytes(user)).toString('hex')}`;
  const ad = KeyRing.associatedData('snapshots', subject);
  const record = sealRows(key, rowsAssociatedData(id, 'vectors.sealed'), 7, uuidBytes(user), row, D);
  t.is(record.length, recordBytes(D));
  const blob = Buffer.concat([Buffer.from([SEALED_VERSION, 2]), Buffer.from('k1'), record]);
  const opened = openBlob(blob, () => key, ad);
  t.deepEqual(new Float32Array(opened.buffer, opened.byteOffset, D), row);
  t.throws(() => openBlob(blob, () => key, KeyRing.associatedData('snapshots', subject.replace('#7:', '#8:'))), { message: /does not authenticate/ });

  const sealed = sealBlob(key, 'k1', new Uint8Array(row.buffer), ad);
  t.deepEqual(openRow(key, ad, sealed.subarray(2 + 2), D), row);
  t.is(openRow(randomBytes(32), ad, sealed.subarray(4), D), null);
});

test('the mapped sealed store re-ranks exactly as the same rows in clear, and verifies at open', async (t) => {
  const f = rowsFile(3000);
  const store = open(f);
  t.true(store.sealed());
  t.is(await store.verify(), -1);
  const clear = new VectorStore(D, null, 0);
  clear.append(f.x);
  const q = unitRows(3, 99);
  const cand = Int32Array.from({ length: 3 * 500 }, (_, i) => (i * 7919) % 3000);
  const a = store.rerank(q, cand, 10),
    b = clear.rerank(q, cand, 10);
  t.deepEqual(a.labels, b.labels);
  t.deepEqual(a.scores, b.scores);
  t.deepEqual(store.read(1234, 2), f.x.subarray(1234 * D, 1236 * D));
  t.deepEqual(store.exactSearch(q, 5).labels, clear.exactSearch(q, 5).labels);
  t.is(store.overlayBytes(), 0, 'no row held in memory');
  store.close();
});

test('a flipped bit, two swapped rows, a row from another snapshot or bound to another user: refused at open and by the search that reads it', async (t) => {
  const n = 1000;
  const cases: [string, (f: ReturnType<typeof rowsFile>) => { ids?: Uint8Array; bad: number }][] = [
    [
      'a flipped bit',
      (f) => {
        const b = readFileSync(f.file);
        b[recordAt(321) + 100] ^= 0x04;
        writeFileSync(f.file, b);
        return { bad: 321 };
      },
    ],
    [
      'two rows swapped',
      (f) => {
        const b = readFileSync(f.file);
        const r = recordBytes(D);
        const a = Buffer.from(b.subarray(recordAt(10), recordAt(10) + r));
        b.copy(b, recordAt(10), recordAt(20), recordAt(20) + r);
        a.copy(b, recordAt(20));
        writeFileSync(f.file, b);
        return { bad: 10 };
      },
    ],
    [
      'a row moved from another snapshot (same position, same user)',
      (f) => {
        const other = rowsFile(n, undefined, f.users, 2);
        const b = readFileSync(f.file);
        readFileSync(other.file).copy(b, recordAt(500), recordAt(500), recordAt(501));
        writeFileSync(f.file, b);
        return { bad: 500 };
      },
    ],
    [
      'a row bound to another user (the id table says someone else is at that position)',
      (f) => {
        const ids = Uint8Array.from(f.ids);
        uuidBytes(randomUUID(), ids, 700 * 16);
        return { ids, bad: 700 };
      },
    ],
  ];
  for (const [what, damage] of cases) {
    const f = rowsFile(n);
    const { ids, bad } = damage(f);
    const store = open(f, ids);
    t.is(await store.verify(), bad, what);
    const q = unitRows(1, 5);
    const err = t.throws(() => store.rerank(q, Int32Array.from([1, 2, bad, 3]), 2), undefined, what);
    t.is((err as { code?: string }).code, ROW_NOT_AUTHENTIC, what);
    t.notThrows(() => store.rerank(q, Int32Array.from([1, 2, 3]), 2), `${what}: rows left alone still read`);
    store.close();
  }
});

// verify() reads the file in large chunks on several threads (not through the mapping): a damaged row
// is found wherever it falls (inside a chunk, at a chunk's or a thread's first or last row), whether
// the store is mapped lazily (a file large next to RAM) or populated, and the first one is reported.
for (const populate of ['0', '1']) {
  test.serial(`a damaged row anywhere in a file of many read chunks is found at open (SKETCH_POPULATE=${populate})`, async (t) => {
    const n = 20_000; // 41 MB: several 8 MiB chunks per verifying thread
    const f = rowsFile(n);
    const clean = readFileSync(f.file);
    for (const rows of [[n - 1], [0], [4040], [10_000, 19_000], [14_039, 19_999], [9_999, 10_000]]) {
      const b = Buffer.from(clean);
      for (const r of rows) b[recordAt(r) + 28 + ((r * 37) % 2048)] ^= 0x10;
      writeFileSync(f.file, b);
      process.env.SKETCH_POPULATE = populate;
      const store = open(f);
      delete process.env.SKETCH_POPULATE;
      t.is(store.populated(), populate === '1');
      t.is(await store.verify(), Math.min(...rows), `damaged rows ${rows.join(', ')}`);
      store.close();
    }
    writeFileSync(f.file, clean);
    process.env.SKETCH_POPULATE = populate;
    const store = open(f);
    delete process.env.SKETCH_POPULATE;
    t.is(await store.verify(), -1, 'the undamaged file verifies');
    t.deepEqual(store.read(n - 3, 3), f.x.subarray((n - 3) * D), 'and its rows read back');
    store.close();
  });

  // A snapshot file cut after the store opened it (the size is checked at open) must be refused by
  // the verification, not crash the process: its rows past the cut cannot be read whole.
  test.serial(`a rows file cut after it was opened is refused at verify, not a crash (SKETCH_POPULATE=${populate})`, async (t) => {
    const n = 20_000;
    const f = rowsFile(n);
    process.env.SKETCH_POPULATE = populate;
    const store = open(f);
    delete process.env.SKETCH_POPULATE;
    truncateSync(f.file, recordAt(15_000) + 100);
    t.is(await store.verify(), 15_000);
    store.close();
  });
}

test('two processes mapping one snapshot share its pages: the mapping is file-backed and shared, their anonymous memory small', async (t) => {
  const n = 20_000; // 41 MB of sealed rows
  const f = rowsFile(n);
  const access = openRowsFile(f.file, f.id, 'vectors.sealed', ring, D);
  const addon = path.join(path.dirname(createRequire(import.meta.url).resolve('faiss-node/package.json')), 'build', 'Release', 'faiss-node.node');
  // A plain CommonJS child: maps the snapshot (every page, as a replica does), reads every row once,
  // then reports the mapping's line of /proc/self/smaps and its own RssAnon, and waits for its sibling.
  const child = `
    const fs = require('node:fs');
    require('faiss-node');
    const { VectorStore } = require(${JSON.stringify(addon)});
    const a = JSON.parse(fs.readFileSync(process.argv[1], 'utf8'));
    const store = new VectorStore(${D}, a.file, a.rows, { key: Buffer.from(a.key, 'hex'), associatedData: Buffer.from(a.ad, 'hex'), ids: new Uint8Array(Buffer.from(a.ids, 'hex')), headerBytes: a.header });
    store.verify().then((bad) => {
      const q = new Float32Array(${D}); q[0] = 1;
      store.rerank(q, Int32Array.from({ length: a.rows }, (_, i) => i), 1);
      process.stdout.write('ready\\n');
      process.stdin.once('data', () => {
        const smaps = fs.readFileSync('/proc/self/smaps', 'utf8').split(/\\n(?=[0-9a-f]+-[0-9a-f]+ )/);
        const m = smaps.find((s) => s.split('\\n')[0].endsWith(a.file));
        const field = (name) => Number((m.match(new RegExp('^' + name + ':\\\\s+(\\\\d+) kB', 'm')) || [0, -1])[1]);
        const anon = Number(fs.readFileSync('/proc/self/status', 'utf8').match(/RssAnon:\\s+(\\d+) kB/)[1]);
        process.stdout.write(JSON.stringify({ bad, flags: m.split('\\n')[0].split(/\\s+/)[1], rss: field('Rss'), pss: field('Pss'), anonymous: field('Anonymous'), anon }) + '\\n');
        process.stdin.once('data', () => process.exit(0)); // both report while both map the file
      });
    });`;
  const arg = path.join(path.dirname(f.file), 'child.json');
  writeFileSync(
    arg,
    JSON.stringify({
      file: f.file,
      rows: n,
      key: access.key.toString('hex'),
      ad: access.associatedData.toString('hex'),
      ids: Buffer.from(f.ids).toString('hex'),
      header: access.headerBytes,
    }),
    { mode: 0o600 },
  );
  const run = () => {
    const p = spawn(process.execPath, ['-e', child, arg], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    const lines: string[] = [];
    const waiters: ((l: string) => void)[] = [];
    p.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      for (let i; (i = out.indexOf('\n')) >= 0;) {
        const line = out.slice(0, i);
        out = out.slice(i + 1);
        const w = waiters.shift();
        if (w) w(line);
        else lines.push(line);
      }
    });
    const next = () => new Promise<string>((r) => (lines.length ? r(lines.shift()!) : waiters.push(r)));
    return { p, next };
  };
  const a = run(),
    b = run();
  t.is(await a.next(), 'ready');
  t.is(await b.next(), 'ready');
  a.p.stdin.write('go\n');
  b.p.stdin.write('go\n');
  const [ra, rb] = [JSON.parse(await a.next()), JSON.parse(await b.next())];
  a.p.stdin.end('done\n');
  b.p.stdin.end('done\n');
  const fileKiB = Math.floor((HEADER_BYTES + n * recordBytes(D)) / 1024);
  for (const r of [ra, rb]) {
    t.is(r.bad, -1);
    t.is(r.flags, 'r--s', 'mapped read-only and shared');
    t.true(r.rss >= fileKiB * 0.9, `the whole file resident in the mapping (${r.rss} of ${fileKiB} KiB)`);
    // Pss charges each page to the processes that map it: half each, i.e. one copy for the two.
    t.true(r.pss <= r.rss * 0.55, `its pages shared with the other process (Pss ${r.pss} of Rss ${r.rss} KiB)`);
    t.is(r.anonymous, 0, 'no anonymous page in the mapping');
    t.true(r.anon < fileKiB, `the process's anonymous memory (${r.anon} KiB) below the rows it reads (${fileKiB} KiB)`);
  }
  t.pass();
});

// A lazily mapped file (SKETCH_POPULATE=0, as every file over a quarter of the RAM) whose pages are not
// in the page cache: before reading a search's candidates one by one, the store asks the kernel for
// all of them at once (one process_madvise call; SKETCH_RERANK_HINT=0 turns that off, =fadvise and
// =madvise make the per-run calls the store falls back to where process_madvise is refused). Only a
// hint: the results and the refusal of a damaged row are the same either way.
const dropCache = (file: string) => execFileSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none']);
/** Pages of `file` in the page cache (util-linux fincore), or null where it cannot tell. */
const cachedPages = (file: string): number | null => {
  try {
    return Number(execFileSync('fincore', ['--noheadings', '--raw', '--output', 'PAGES', file], { encoding: 'utf8' }).trim());
  } catch {
    return null;
  }
};
const openWith = (f: ReturnType<typeof rowsFile>, env: Record<string, string | undefined>, ids?: Uint8Array) => {
  const saved = { SKETCH_POPULATE: process.env.SKETCH_POPULATE, SKETCH_RERANK_HINT: process.env.SKETCH_RERANK_HINT };
  for (const [k, v] of Object.entries(env))
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  try {
    return open(f, ids);
  } finally {
    for (const [k, v] of Object.entries(saved))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
  }
};

test.serial('a lazily mapped store re-ranks and scores a cold file exactly as the rows in clear, with the rows asked for at once or not', (t) => {
  const n = 20_000; // 41 MB: candidates far apart in the file, on pages of their own
  const f = rowsFile(n);
  const clear = new VectorStore(D, null, 0);
  clear.append(f.x);
  const extra = unitRows(3, 77);
  clear.append(extra);
  const q = unitRows(4, 42);
  // Every query's candidates: rows spread over the file, the first and last rows (the last one ends
  // the mapping), -1 and rows appended after the base.
  const cand = Int32Array.from({ length: 4 * 300 }, (_, i) =>
    i % 300 === 7 ? -1 : i % 300 === 8 ? n - 1 : i % 300 === 9 ? 0 : i % 300 === 10 ? n + 1 : (i * 7919) % n,
  );
  const want = clear.rerank(q, cand, 20);
  const wantScores = clear.scores(q.subarray(0, D), cand.subarray(0, 300));
  for (const [populate, hint] of [
    ['0', undefined],
    ['0', 'fadvise'],
    ['0', 'madvise'],
    ['0', '0'],
    ['1', undefined],
  ] as const) {
    const what = `SKETCH_POPULATE=${populate} SKETCH_RERANK_HINT=${hint ?? '(default)'}`;
    const store = openWith(f, { SKETCH_POPULATE: populate, SKETCH_RERANK_HINT: hint });
    t.is(store.populated(), populate === '1', what);
    store.append(extra);
    dropCache(f.file);
    const got = store.rerank(q, cand, 20);
    t.deepEqual(got.labels, want.labels, what);
    t.deepEqual(got.scores, want.scores, what);
    dropCache(f.file);
    t.deepEqual(store.scores(q.subarray(0, D), cand.subarray(0, 300)), wantScores, what);
    store.close();
  }
});

test.serial('a lazily mapped store asks for every candidate row before reading the first: rows after a refused one are already being read', (t) => {
  const n = 20_000;
  const f = rowsFile(n);
  const b = readFileSync(f.file);
  b[recordAt(5) + 200] ^= 0x01;
  writeFileSync(f.file, b);
  // The damaged row first, then 60 rows on pages of their own: the re-rank refuses the first and reads
  // none of the others, so what the page cache then holds of them was asked for before any read.
  const far = Array.from({ length: 60 }, (_, i) => 200 + i * 300);
  const q = unitRows(1, 3);
  for (const hint of [undefined, 'fadvise', 'madvise', '0'] as const) {
    const what = `SKETCH_RERANK_HINT=${hint ?? '(default)'}`;
    for (const call of ['rerank', 'scores'] as const) {
      const store = openWith(f, { SKETCH_POPULATE: '0', SKETCH_RERANK_HINT: hint });
      dropCache(f.file);
      const before = cachedPages(f.file);
      const pos = Int32Array.from([5, ...far]);
      const err = t.throws(() => (call === 'rerank' ? store.rerank(q, pos, 3) : store.scores(q, pos)), undefined, `${what} ${call}`);
      t.is((err as { code?: string }).code, ROW_NOT_AUTHENTIC, `${what} ${call}`);
      t.deepEqual(store.read(far[0]!, 1), f.x.subarray(far[0]! * D, (far[0]! + 1) * D), `${what} ${call}: rows left alone still read`);
      const after = cachedPages(f.file);
      store.close();
      // Where the page cache can be dropped and counted (not on tmpfs, fincore present).
      if (before === null || after === null || before > 4) {
        t.log(`${what}: page cache not measurable here (${before} pages cached after the drop)`);
        continue;
      }
      if (hint === '0') t.true(after - before <= 6, `${what} ${call}: only the refused row and the one read (${after - before} pages)`);
      else t.true(after - before >= far.length, `${what} ${call}: every candidate's pages asked for (${after - before} pages)`);
    }
  }
});
