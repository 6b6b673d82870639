/**
 * What the light sequence (SPEC 14.1) costs a liveness frames call: the same sessions of the minimum
 * pose frames with LIVENESS_LIGHT=required (6 to 8 light frames more, as `light` jobs of the face path) and
 * with LIVENESS_LIGHT=off, taking turns call by call (docs/performance.md "Liveness light frames").
 *
 *   NODE_ENV=development npx tsx bench/liveness-light.ts            # 15 rounds
 *   BENCH_LIGHT_ROUNDS=40 NODE_ENV=development npx tsx bench/liveness-light.ts
 *
 * The service runs in this process as the tests run it (test/helpers/harness.ts: the web process, one
 * face worker, real models, its own database and Redis prefix), plus a second web process of the same
 * deployment with the light sequence off. The light frames are the session's colours painted on the
 * centre frame (test/helpers/screen-light.ts); the near-copy check is off (the photos are sent again
 * every round) and LIVENESS_MIN_STEP_MS is 0 (the cost, not a person's time).
 */
import { readFileSync } from 'node:fs';
import sharp from 'sharp';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createDeps, closeDeps } from '../processes/web/deps.js';
import { startWebProcess } from '../processes/web.js';
import { createLogger } from '../platform/logger.js';
import { freePort } from '../scripts/lib/private-services.js';
import { ROOT, startHarness } from '../test/helpers/harness.js';
import { client, type FormFile } from '../test/helpers/http.js';
import { newOperator } from '../test/helpers/principals.js';
import { paintLights } from '../test/helpers/screen-light.js';
import { LIGHT_COLOURS } from '../features/liveness/light-response.js';

const ROUNDS = Number(process.env.BENCH_LIGHT_ROUNDS ?? 15);
const DIR = path.join(ROOT, 'test/fixtures/faces/liveness');
const pct = (xs: number[], p: number) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]! : NaN);

let nonce = 0;
/** Bytes never sent before (a JPEG comment), the same pixels. */
const unique = (jpeg: Buffer): FormFile => {
  const text = Buffer.from(`bench ${++nonce} ${process.pid} ${Date.now()}`);
  const com = Buffer.concat([Buffer.from([0xff, 0xfe, 0, text.length + 2]), text]);
  return { data: Buffer.concat([jpeg.subarray(0, 2), com, jpeg.subarray(2)]), filename: 'f.jpg', type: 'image/jpeg' };
};

async function main(): Promise<void> {
  const env = { LIVENESS_MIN_STEP_MS: '0', LIVENESS_NEAR_REPLAY_WINDOW_SECONDS: '0', LIVENESS_SESSIONS_PER_HOUR: '100000', LOG_LEVEL: 'silent' };
  const h = await startHarness({ face: true, env });
  const offConfig = h.configFor({ PORT: String(await freePort()), LIVENESS_LIGHT: 'off' });
  const offDeps = createDeps(offConfig, { logger: createLogger({ level: 'silent' }) });
  const offWeb = await startWebProcess(offDeps, { port: offConfig.http.port, poller: false });
  try {
    const op = await newOperator(h);
    const centre = readFileSync(path.join(DIR, 'bush2-center.jpg'));
    const painted = await paintLights(h.deps.face, centre, LIGHT_COLOURS);
    const lit = new Map(LIGHT_COLOURS.map((c, i) => [c, painted[i]!]));
    // As the console sends them: at most 480 px on the long side (console/src/consumer/LivenessCheck.tsx).
    const small = new Map(
      await Promise.all(
        LIGHT_COLOURS.map(
          async (c, i) => [c, await sharp(painted[i]!).resize(480, 480, { fit: 'inside', withoutEnlargement: true }).jpeg({ quality: 92 }).toBuffer()] as const,
        ),
      ),
    );
    const figures = { required: [] as number[], small: [] as number[], off: [] as number[] };
    const outcomes: Record<string, number> = {};
    const call = async (base: string, kind: 'required' | 'small' | 'off') => {
      for (;;) {
        const created = await client(base).post('/liveness/sessions', { token: op.token, json: {} });
        const s = created.body.session as { id: string; steps: string[]; lights?: string[]; minFrames: number };
        if (s.steps.length > s.minFrames) continue; // the minimum frames only
        const names = s.steps.map((st) => `bush2-${st}`);
        if (names.length < s.minFrames) names.push('bush2-center2');
        const frames = names.map((n) => unique(readFileSync(path.join(DIR, `${n}.jpg`))));
        const lightFrames = (s.lights ?? []).map((c) => unique((kind === 'small' ? small : lit).get(c)!));
        const t = performance.now();
        const r = await client(base).post(`/liveness/sessions/${s.id}/frames`, {
          token: op.token,
          form: { frames, ...(lightFrames.length ? { lightFrames } : {}) },
        });
        const ms = performance.now() - t;
        const key = `${kind} ${r.status === 200 ? `${r.body.session.status}${r.body.session.reason ? ` ${r.body.session.reason}` : ''}` : `HTTP ${r.status}`}`;
        outcomes[key] = (outcomes[key] ?? 0) + 1;
        figures[kind].push(ms);
        return;
      }
    };
    const kinds = [
      [h.url, 'required'],
      [h.url, 'small'],
      [offWeb.web.url, 'off'],
    ] as const;
    for (const [base, kind] of kinds) await call(base, kind);
    figures.required.length = figures.small.length = figures.off.length = 0;
    for (let i = 0; i < ROUNDS; i++) {
      // The order rotates each round, so that no kind always runs on a warmer process.
      for (let k = 0; k < kinds.length; k++) {
        const [base, kind] = kinds[(i + k) % kinds.length]!;
        await call(base, kind);
      }
    }
    const row = (k: 'required' | 'small' | 'off') => `${pct(figures[k], 50).toFixed(0)} / ${pct(figures[k], 99).toFixed(0)}`;
    console.log(
      `Liveness frames call, ${ROUNDS} rounds each, p50 / p99 wall ms, load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}:`,
    );
    console.log(`| LIVENESS_LIGHT | frames call p50 / p99 ms |`);
    console.log(`|---|---|`);
    console.log(`| required (3 pose + 6 to 8 light frames, full size) | ${row('required')} |`);
    console.log(`| required (3 pose + 6 to 8 light frames, 480 px as the console sends) | ${row('small')} |`);
    console.log(`| off (3 pose frames) | ${row('off')} |`);
    const ratio = (k: 'required' | 'small') => (pct(figures[k], 50) / pct(figures.off, 50)).toFixed(2);
    console.log(`ratios of the p50s to off: full size ${ratio('required')}, 480 px ${ratio('small')}; outcomes ${JSON.stringify(outcomes)}`);
  } finally {
    await offWeb.close();
    await closeDeps(offDeps);
    await h.stop();
  }
}

await main();
