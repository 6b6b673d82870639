/**
 * Resharding without downtime (docs/vector-index.md, "Resharding"), from 1 shard to 2: the new shard
 * set's replicas start beside the old index while writes go on; once every new replica is warm the
 * web processes switch their SEARCH_SHARDS (one after the other: during the switch both kinds answer,
 * and answer alike); then the old index stops. Every search along the way answers, with every write
 * that answered before it.
 */
import test from 'ava';
import { FaceService } from '../../features/face/face-service.js';
import { currentChangeSeq, upsertCanonical } from '../../features/face/embeddings-repository.js';
import { FACE_ENGINE_VERSION } from '../../platform/face/face-models.js';
import { HandoffSealer } from '../../platform/face-path/sealing.js';
import { useHarness, type RunningWorker } from '../helpers/harness.js';
import { newConsumer } from '../helpers/principals.js';
import { rng } from '../helpers/vectors.js';

const DIM = 512;
function unit(seed: number): number[] {
  const r = rng(seed);
  const v = Array.from({ length: DIM }, () => r() - 0.5);
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}

// The harness's web process is the one that has not switched yet (one shard), served by one index.
const h = useHarness(test, { search: 1, env: { SEARCH_SHARDS: '1', SEARCH_EXACT_CANDIDATES: '0', SEARCH_SHARD_TIMEOUT_MS: '3000' } });

test.serial(
  '1 → 2 shards: new replicas beside the old index, the web processes switched when warm, the old index stopped; no search fails, none misses a write',
  async (t) => {
    const seeds = new Map<string, number>();
    const enrol = async (seed: number) => {
      const u = await newConsumer(h);
      await upsertCanonical(h.deps.db, u.userId, unit(seed), 'link_nin', FACE_ENGINE_VERSION);
      seeds.set(u.userId, seed);
      return u.userId;
    };
    for (let i = 0; i < 120; i += 20) await Promise.all(Array.from({ length: 20 }, (_, j) => enrol(1000 + i + j)));
    const oldWeb = h.deps.face;
    const switched = new FaceService({
      config: h.configFor({ SEARCH_SHARDS: '2' }),
      embeddings: h.deps.repos.embeddings,
      jobs: h.deps.jobs,
      sealer: new HandoffSealer(h.deps.keyRing),
      metrics: h.deps.metrics,
    });

    // Writes and searches go on through the whole procedure; every search must find what was written before it.
    let stop = false;
    let n = 5000;
    const failures: string[] = [];
    let searches = 0;
    const phase = { oldWeb: true, newWeb: false };
    // The old web's search in flight, if any: a web process switched away from the old index finishes
    // what it already asked before that index stops (the procedure's order), so step 4 waits for it.
    let oldInFlight: Promise<unknown> = Promise.resolve();
    const traffic = (async () => {
      while (!stop) {
        const id = await enrol(n++);
        for (const face of [oldWeb, switched]) {
          // Before the switch only the old web answers; after the old index stops only the new one.
          if ((face === switched && !phase.newWeb) || (face === oldWeb && !phase.oldWeb)) continue;
          try {
            const asked = face.searchByEmbedding(unit(seeds.get(id)!), 1);
            if (face === oldWeb) oldInFlight = asked.catch(() => {});
            const r = await asked;
            searches++;
            if (r.hits[0]?.userId !== id) failures.push(`${face === oldWeb ? 'old' : 'new'} web missed a write`);
          } catch (e) {
            failures.push(`${face === oldWeb ? 'old' : 'new'} web: ${(e as Error).message}`);
          }
        }
      }
    })();

    // 1. The new shard set beside the old index.
    const shards: RunningWorker[] = [];
    for (let i = 0; i < 2; i++) shards.push(await h.startSearchWorker({ SEARCH_SHARDS: '2', SEARCH_SHARD: String(i) }));
    // 2. Warm: every new replica answers /health 200 and has applied the log's head.
    const head = BigInt(await currentChangeSeq(h.deps.db));
    for (const w of shards) {
      const until = Date.now() + 20_000;
      for (;;) {
        const res = await fetch(`${w.url}/health`);
        const body = (await res.json()) as { status: string; appliedSeq: string | null; shard: { index: number; count: number } };
        if (res.status === 200 && BigInt(body.appliedSeq ?? '0') >= head) break;
        if (Date.now() > until) throw new Error('a new shard replica did not warm up');
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    // 3. The web processes switch, one after the other: for a while both answer, and answer alike.
    phase.newWeb = true;
    for (let p = 0; p < 20; p++) {
      const probe = unit(1000 + p * 5);
      let [a, b] = await Promise.all([oldWeb.searchByEmbedding(probe, 5), switched.searchByEmbedding(probe, 5)]);
      // A write of the traffic above can land between the two searches and be seen by one of them:
      // asked again, both have applied it.
      if (JSON.stringify(a.hits) !== JSON.stringify(b.hits))
        [a, b] = await Promise.all([oldWeb.searchByEmbedding(probe, 5), switched.searchByEmbedding(probe, 5)]);
      t.deepEqual(b.hits, a.hits, `probe ${p}`);
    }
    phase.oldWeb = false;
    // 4. The old index stops, once the old web's last search has been answered.
    await oldInFlight;
    await h.searchWorkers[0]!.close();
    await new Promise((r) => setTimeout(r, 500));
    stop = true;
    await traffic;
    t.deepEqual(failures, []);
    t.true(searches > 10, `searches during the procedure: ${searches}`);
    // The new set alone holds everyone, the writes of the procedure included.
    const probe = [...seeds].at(-1)!;
    t.is((await switched.searchByEmbedding(unit(probe[1]), 1)).hits[0]?.userId, probe[0]);
    const sizes = await Promise.all(shards.map(async (w) => ((await (await fetch(`${w.url}/health`)).json()) as { size: number }).size));
    t.is(
      sizes.reduce((x, y) => x + y, 0),
      seeds.size,
    );
  },
);
