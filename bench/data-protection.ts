/**
 * The cost of sealing templates (docs/data-protection.md, "Cost"): `npx tsx bench/data-protection.ts [N]`.
 * Measures, on one core, what the key ring adds to a request (seal one template, open one: link does
 * one seal and two opens, /verify/self one open, plus one seal on a refresh) and to a replica's full
 * build from PostgreSQL (open N blobs; default N = 200000, extrapolated to 1M).
 */
import { randomBytes } from 'node:crypto';
import { KeyRing } from '../platform/keys/key-ring.js';
import { openTemplate, sealTemplate } from '../platform/keys/templates.js';

const N = Number(process.argv[2] ?? 200_000);
const ring = KeyRing.from({ biometricKeys: `k1:${randomBytes(32).toString('base64')}`, biometricActiveKeyId: 'k1' });
const v = Array.from({ length: 512 }, (_, i) => Math.sin(i + 1) / 16);
const ids = Array.from({ length: 1000 }, () => crypto.randomUUID());

// Per request: median of 2000 seals and opens.
const seal: number[] = [],
  open: number[] = [];
for (let i = 0; i < 2000; i++) {
  const id = ids[i % ids.length]!;
  let t = process.hrtime.bigint();
  const blob = sealTemplate(ring, id, v);
  seal.push(Number(process.hrtime.bigint() - t) / 1e3);
  t = process.hrtime.bigint();
  openTemplate(ring, id, blob);
  open.push(Number(process.hrtime.bigint() - t) / 1e3);
}
const p50 = (a: number[]) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)]!;

// A full build's decryption: N blobs opened in sequence.
const blobs = ids.map((id) => sealTemplate(ring, id, v));
const t0 = performance.now();
for (let i = 0; i < N; i++) openTemplate(ring, ids[i % ids.length]!, blobs[i % blobs.length]!);
const ms = performance.now() - t0;
const result = {
  sealP50Us: +p50(seal).toFixed(1),
  openP50Us: +p50(open).toFixed(1),
  n: N,
  openAllMs: Math.round(ms),
  extrapolated1MS: +(((ms / N) * 1e6) / 1000).toFixed(2),
};
console.log(JSON.stringify(result));

// `--snapshot M`: the erasure's snapshot rewrite at M enrolled (a scratch database; BinarySketch512).
const at = process.argv.indexOf('--snapshot');
if (at > 0) {
  const M = Number(process.argv[at + 1] ?? 50_000);
  const { mkdtempSync } = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const { createTestDatabase } = await import('../test/helpers/db.js');
  const { createDb } = await import('../platform/database/db.js');
  const { IndexReplica } = await import('../features/search/worker/replica.js');
  const { removeCanonical } = await import('../features/face/embeddings-repository.js');
  const { ErasuresRepository } = await import('../features/accounts/erasures-repository.js');
  const { createLogger } = await import('../platform/logger.js');
  const { FACE_ENGINE_VERSION } = await import('../platform/face/face-models.js');
  const tdb = await createTestDatabase();
  const db = createDb(tdb.url, 4, { bindModels: false });
  const dir = mkdtempSync(path.join(os.tmpdir(), 'faceid-erasure-bench-'));
  try {
    for (let i = 0; i < M; i += 1000) {
      const m = Math.min(1000, M - i);
      const users = (await db.raw(`INSERT INTO users (phone) SELECT '+9' || (g + ?)::text FROM generate_series(1, ?) g RETURNING id`, [i, m])).rows as {
        id: string;
      }[];
      await db('canonicalEmbeddings').insert(
        users.map(({ id }, j) => {
          const w = Array.from({ length: 512 }, (_, k) => Math.sin((i + j + 1) * (k + 1)));
          return { userId: id, embedding: sealTemplate(ring, id, w), keyId: ring.activeKeyId, source: 'link_nin', engineVersion: FACE_ENGINE_VERSION };
        }),
      );
    }
    const logger = createLogger({ level: 'silent' });
    const make = () =>
      new IndexReplica(db, {
        factory: 'BinarySketch512',
        nprobe: 1,
        syncIntervalMs: 0,
        pruneIntervalMs: 0,
        autoRebuild: false,
        snapshotDir: dir,
        keyRing: ring,
        logger,
      });
    let t = performance.now();
    const first = make();
    await first.start();
    const fullBuildMs = performance.now() - t;
    const victim = (await db('canonicalEmbeddings').first('userId')).userId as string;
    const { seq } = await removeCanonical(db, victim);
    const erasures = new ErasuresRepository(db);
    await db.transaction((trx) => erasures.begin(victim, seq, trx));
    await erasures.markAfterCommitDone(victim);
    t = performance.now();
    await first.eraseFromSnapshots();
    const rewriteMs = performance.now() - t;
    await first.stop();
    t = performance.now();
    const second = make();
    await second.start();
    const snapshotStartMs = performance.now() - t;
    await second.stop();
    console.log(
      JSON.stringify({
        enrolled: M,
        fullBuildWithDecryptMs: Math.round(fullBuildMs),
        erasureSnapshotRewriteMs: Math.round(rewriteMs),
        coldStartFromSnapshotMs: Math.round(snapshotStartMs),
      }),
    );
  } finally {
    await db.destroy();
    await tdb.drop();
  }
}
