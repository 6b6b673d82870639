/**
 * A flooding consumer against /verify/self while operators identify (docs/security.md, "Flooding client").
 *
 *   NODE_ENV=development npx tsx bench/verify-self-flood.ts            # 20 s per phase
 *   BENCH_FLOOD_SECONDS=60 BENCH_FLOOD_PARALLEL=16 NODE_ENV=development npx tsx bench/verify-self-flood.ts
 *
 * The service runs in this process as the tests run it (test/helpers/harness.ts: the web process, one
 * face worker and one search worker, real models, its own database and Redis prefix). Two operators
 * identify in a closed loop for BENCH_FLOOD_SECONDS, first alone, then while one enrolled consumer sends
 * BENCH_FLOOD_PARALLEL parallel /verify/self uploads in a loop: the worst upload the service still
 * decodes (a PNG just under SELFIE_MAX_PIXELS, a few KB on the wire) and the 40 MP one the old limit let
 * through. Prints the operators' p50/p99 and error rate in both phases and what the flood got (by status).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { hasFace } from '../features/face/face-service.js';
import { upsertCanonical } from '../features/face/embeddings-repository.js';
import { ROOT, startHarness } from '../test/helpers/harness.js';
import { client } from '../test/helpers/http.js';
import { newConsumer, newOperator } from '../test/helpers/principals.js';

const SECONDS = Number(process.env.BENCH_FLOOD_SECONDS ?? 20);
const PARALLEL = Number(process.env.BENCH_FLOOD_PARALLEL ?? 8);
const photo = (rel: string) => readFileSync(path.join(ROOT, 'test', 'fixtures', 'faces', rel));
const pct = (xs: number[], p: number) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]! : NaN);

async function main(): Promise<void> {
  const h = await startHarness({ face: true, search: 1, env: { FACE_JOB_TIMEOUT_MS: '10000', LOG_LEVEL: 'silent' } });
  try {
    const consumer = await newConsumer(h);
    const a = await h.deps.face.analyseCapture(photo('lfw/Bush_1.png'), 'single');
    if (!hasFace(a)) throw new Error('no face');
    const e = await h.deps.face.embedCapture(a);
    await upsertCanonical(h.deps.db, consumer.userId, e.embedding, 'link_nin', e.engineVersion);
    const operators = [await newOperator(h), await newOperator(h)];
    const side = Math.floor(Math.sqrt(h.config.biometrics.selfieMaxPixels)) - 16;
    const uploads = [
      await sharp({ create: { width: side, height: side, channels: 3, background: '#7f7f7f' } })
        .png({ compressionLevel: 9 })
        .toBuffer(),
      await sharp({ create: { width: 8000, height: 5000, channels: 3, background: '#7f7f7f' } })
        .png({ compressionLevel: 9 })
        .toBuffer(),
    ];
    const probe = photo('lfw/Bush_2.png');

    const identifyLoop = async (until: number, token: string, out: { ms: number[]; errors: number; total: number }) => {
      while (Date.now() < until) {
        const t0 = performance.now();
        const res = await client(h.url).post('/identify', {
          token,
          form: { attestation: 'true', file: { data: probe, filename: 'p.png', type: 'image/png' } },
        });
        out.total++;
        if (res.status === 200) out.ms.push(performance.now() - t0);
        else out.errors++;
      }
    };
    const phase = async (flood: boolean) => {
      const until = Date.now() + SECONDS * 1000;
      const ops = { ms: [] as number[], errors: 0, total: 0 };
      const floodStatus: Record<string, number> = {};
      const floodLoop = async (i: number) => {
        while (Date.now() < until) {
          const data = uploads[i % uploads.length]!;
          const res = await client(h.url).post('/verify/self', { token: consumer.token, form: { image: { data, filename: 'x.png', type: 'image/png' } } });
          const key = `${res.status}${res.body?.error ? ` ${res.body.error}` : ''}`;
          floodStatus[key] = (floodStatus[key] ?? 0) + 1;
        }
      };
      await Promise.all([
        ...operators.map((o) => identifyLoop(until, o.token, ops)),
        ...(flood ? Array.from({ length: PARALLEL }, (_, i) => floodLoop(i)) : []),
      ]);
      return {
        p50: Math.round(pct(ops.ms, 50)),
        p99: Math.round(pct(ops.ms, 99)),
        identifies: ops.total,
        errorRate: ops.total ? +(ops.errors / ops.total).toFixed(3) : NaN,
        flood: floodStatus,
      };
    };
    await phase(false); // warm-up
    const without = await phase(false);
    const withFlood = await phase(true);
    console.log(JSON.stringify({ seconds: SECONDS, floodParallel: PARALLEL, uploadBytes: uploads.map((u) => u.length), without, withFlood }));
  } finally {
    await h.stop();
  }
}

await main();
