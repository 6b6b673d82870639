/**
 * The face worker (Procfile `face`): loads the four ONNX models once, serves the `liveness`, `embed`
 * and `light` queues, and answers `GET /version` and `GET /health` on FACE_ENGINE_PORT for the API's
 * `/models` and `/health`.
 *
 * Face outcomes of the photo (`invalid_image`, `no_face`, `multiple_faces`) are job results; anything
 * else the engine throws is an engine fault and fails the job (the API answers 503).
 */
import { HandoffSealer } from '../../../platform/face-path/sealing.js';
import { keyRingOf } from '../../../platform/keys/templates.js';
import { RedisFaceHandoff, type FaceHandoff } from '../../../platform/face-path/handoff.js';
import { sealSearchEmbedding } from '../../../platform/face-path/search-embedding.js';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Config } from '../../../platform/config.js';
import { FACE_ENGINE_VERSION, FACE_MODELS } from '../../../platform/face/face-models.js';
import { isFaceError } from '../../../platform/face/face-error.js';
import { faceGrid, sampleLightFrame } from '../../../platform/face/frame-measures.js';
import { decodeRgb } from '../../../platform/face/image.js';
import type { EmbedJob, EmbedResult, LightJob, LightJobResult, LivenessJob, LivenessJobResult } from '../../../platform/jobs/index.js';
import { createLogger, type Logger } from '../../../platform/logger.js';
import { FaceEngine, type StepClock } from './pipeline/engine.js';
import { decodeAlignedFace, encodeAlignedFace } from './pipeline/embed.js';
import { runQueues, type JobContext } from '../../../platform/worker-runtime/run-queue.js';
import { startStatusServer } from '../../../platform/worker-runtime/status-server.js';
import { loadWithProvider, providerMetric, type ExecutionProvider } from './execution-provider.js';
import { PROJECT_ROOT as ROOT } from '../../../platform/paths.js';

export interface RunningFaceWorker {
  url: string;
  close(): Promise<void>;
}

const elapsed = (t0: number) => Math.round((performance.now() - t0) * 10) / 10;

/** This process's CPU time so far, ms (user + system). */
function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/**
 * Per-step clocks inside the worker, summed since the process started (GET /clocks on the status
 * port): for each queue, jobs handled, the wait from the job's creation to its handler starting
 * (queue + Redis + wake-up), the handler's own time, and the engine's steps. For profiling the face
 * path (bench/face-path.ts); never a payload or a result.
 */
export class WorkerClocks {
  readonly byQueue: Record<string, { jobs: number; msByStep: Record<string, number> }> = {};

  /**
   * One job's clock. Beside each step's wall time it sums `cpu.<step>`: this process's CPU time since
   * the step before (getrusage, about a microsecond), so that a step whose wall time grows can be told
   * apart from one that waits (for a core, for the event loop's turn). Exact with one job in flight in
   * the process; with several, a step's CPU includes the other jobs' work done meanwhile.
   */
  clock(queue: string): StepClock {
    const q = (this.byQueue[queue] ??= { jobs: 0, msByStep: {} });
    let cpu = cpuMs();
    return (step, ms) => {
      q.msByStep[step] = (q.msByStep[step] ?? 0) + ms;
      if (step === 'waitSinceCreated' || step === 'handler') return;
      const now = cpuMs();
      q.msByStep[`cpu.${step}`] = (q.msByStep[`cpu.${step}`] ?? 0) + now - cpu;
      cpu = now;
    };
  }

  job(queue: string): void {
    (this.byQueue[queue] ??= { jobs: 0, msByStep: {} }).jobs++;
  }
}

/**
 * The liveness stage as a job: the engine's call, with photo outcomes turned into results. With an
 * `embedNext`, the chosen face is embedded here, in this process, as soon as it is aligned (before the
 * anti-spoof model), the search it names is added with the embedding (platform/face-path/follow-on.ts)
 * so that it runs while this stage finishes, and the embed stage is answered with this job's reply
 * (`answer`): no embed job, no aligned face through Redis, no second face process woken. Without one,
 * the aligned face is sealed and left in Redis for a later embed job (platform/face-path/handoff.ts).
 * Its `ms` is the stage's own time in the worker, the in-place embed's excluded (that is the embed
 * stage's `ms`).
 */
export async function livenessHandler(
  engine: FaceEngine,
  handoff: FaceHandoff,
  job: LivenessJob,
  deadlineAt: number,
  clock?: StepClock,
  /** Adds the search the job's `embedNext` names, and answers its embed stage; required when the job names one. */
  chain?: Pick<JobContext, 'followOn' | 'answer'>,
): Promise<LivenessJobResult> {
  const t0 = performance.now();
  // The image the API left for this job (sealed under its salt): gone means the request's deadline
  // passed or the value was lost with Redis, a fault of the path (503), not of the photo.
  const sealed = await handoff.take('image', job.imageRef);
  clock?.('take', performance.now() - t0);
  if (!sealed) throw new Error('the image of the liveness job is gone (expired or already taken)');
  const image = handoff.sealer.open(sealed, job.resultSalt);
  const next = job.embedNext;
  if (next && !chain) throw new Error('the liveness job names an embed stage but this runner cannot answer one');
  // With an embed stage, the face is embedded right after it is aligned, from the pixels in hand; its
  // search goes out at once (not awaited until the stage's end) and runs on the search process while
  // this one runs its anti-spoof model.
  let searchAdded: Promise<unknown> | undefined;
  let embedMs = 0;
  const onAligned = next
    ? async (aligned: Float32Array): Promise<void> => {
        const te = performance.now();
        const r = await engine.embedAligned(aligned, clock);
        if (next.searchNext) {
          // Its embedding goes sealed beside the search job, on the connection the job is added on,
          // just before it (platform/face-path/search-embedding.ts).
          const probe = sealSearchEmbedding(handoff.sealer, r.embedding);
          const put = handoff.put('embedding', probe.sealed, deadlineAt, probe.ref.embeddingRef);
          searchAdded = Promise.all([put, chain!.followOn('search', next.searchNext.jobId, { ...next.searchNext.request, ...probe.ref }).added]);
          searchAdded.catch(() => {}); // awaited below
        }
        const sealedEmbedding = handoff.sealer.sealEmbedding(r.embedding, next.resultSalt);
        embedMs = performance.now() - te;
        chain!.answer('embed', next.jobId, { ok: true, sealedEmbedding, engineVersion: FACE_ENGINE_VERSION, ms: Math.round(embedMs * 10) / 10 });
        clock?.('embedInPlace', embedMs);
      }
    : undefined;
  try {
    const { aligned, ...r } = await engine.liveness(image, job.mode, {
      align: !next,
      onAligned,
      clock,
    });
    await searchAdded;
    const alignedFaceRef =
      !next && r.livenessScore >= job.handOffMinLiveness
        ? await handoff.put('aligned', handoff.sealer.seal(encodeAlignedFace(aligned!), job.resultSalt), deadlineAt)
        : null;
    // The stage's own time in the worker: taking the image, the engine, the aligned face's hand-off.
    return { ok: true, ...r, alignedFaceRef, ms: Math.round((performance.now() - t0 - embedMs) * 10) / 10 };
  } catch (e) {
    if (!isFaceError(e)) throw e;
    return { ok: false, code: e.code, faceCount: e.faceCount ?? 0, ...(e.quality ? { quality: e.quality } : {}), ms: elapsed(t0) };
  }
}

/**
 * A liveness session's light frames, or a run of them, as one job (platform/jobs/light.ts): the images the API left
 * sealed in Redis, the face found on the job's first and followed on the others (FaceEngine.lightFrames),
 * every frame's face embedded, the embeddings sealed. An image that is gone is a fault of the path
 * (503), as for the liveness job; one that does not decode is `invalid_image` for its frame.
 */
export async function lightHandler(engine: FaceEngine, handoff: FaceHandoff, job: LightJob, clock?: StepClock): Promise<LightJobResult> {
  const t0 = performance.now();
  const sealed = await Promise.all(job.imageRefs.map((ref) => handoff.take('image', ref)));
  clock?.('take', performance.now() - t0);
  if (sealed.some((s) => !s)) throw new Error('an image of the light job is gone (expired or already taken)');
  const images = sealed.map((s) => handoff.sealer.open(s!, job.resultSalt));
  try {
    const r = await engine.lightFrames(images, job.embed, clock);
    // The light check's measures on each face, here where the pixels are: the API hands most light
    // frames on as they came and decodes none of them itself.
    const t = performance.now();
    const frames = r.frames.map((f, i) => {
      if (!f.ok) return f;
      const grid = faceGrid(r.pixels[i]!, f.face.landmarks5);
      const sample = sampleLightFrame(r.pixels[i]!, f.face.box);
      return { ...f, grid: Buffer.from(grid.buffer, grid.byteOffset, grid.byteLength).toString('base64'), sample };
    });
    clock?.('measure', performance.now() - t);
    return {
      frames,
      embeddings: r.embeddings.map((e) => (e ? { sealedEmbedding: handoff.sealer.sealEmbedding(e, job.embedSalt), engineVersion: FACE_ENGINE_VERSION } : null)),
      ms: elapsed(t0),
    };
  } catch (e) {
    if (!isFaceError(e) || e.code !== 'invalid_image') throw e;
    // Which frames do not decode (the API forgets only their digests): each tried alone, on this rare path.
    const decodable = await Promise.all(
      images.map((img) =>
        decodeRgb(img).then(
          () => true,
          () => false,
        ),
      ),
    );
    return {
      frames: decodable.map((ok) => (ok ? { ok: false, code: 'not_examined', faceCount: 0 } : { ok: false, code: 'invalid_image', faceCount: 0 })),
      embeddings: images.map(() => null),
      ms: elapsed(t0),
    };
  }
}

/**
 * The embed stage as a job: the face the liveness stage aligned (taken from Redis, sealed under that
 * job's salt), through MobileFaceNet. Its `ms` is the stage's own time in the worker: taking and opening
 * the aligned face, the model, sealing the embedding. A face that is gone (expired with its request's
 * deadline, or already taken) is a fault of the path, not of the photo: the job fails (503).
 */
export async function embedHandler(
  engine: FaceEngine,
  handoff: FaceHandoff,
  job: EmbedJob,
  clock?: StepClock,
  /** Adds the job's `searchNext` (JobContext.followOn) by the job's deadline; required when the job names one. */
  next?: { followOn: JobContext['followOn']; deadlineAt: number },
): Promise<EmbedResult> {
  const t0 = performance.now();
  if (job.searchNext && !next) throw new Error('the embed job names a search follow-on but this runner cannot add one');
  const sealed = await handoff.take('aligned', job.alignedFaceRef);
  clock?.('take', performance.now() - t0);
  if (!sealed) throw new Error('the aligned face of the liveness stage is gone (expired or already taken)');
  let aligned: Float32Array;
  const tOpen = performance.now();
  try {
    aligned = decodeAlignedFace(handoff.sealer.open(sealed, job.alignedFaceSalt));
  } catch {
    // Not what a liveness job produced (tampered, wrong salt): like an undecodable image.
    return { ok: false, code: 'invalid_image', ms: elapsed(t0) };
  }
  clock?.('open', performance.now() - tOpen);
  const r = await engine.embedAligned(aligned, clock);
  if (job.searchNext) {
    // The search starts before this stage replies; its embedding goes sealed beside it, as the API's
    // would (platform/face-path/search-embedding.ts), on the connection the job is added on, just before it.
    const th = performance.now();
    const probe = sealSearchEmbedding(handoff.sealer, r.embedding);
    const put = handoff.put('embedding', probe.sealed, next!.deadlineAt, probe.ref.embeddingRef);
    await Promise.all([put, next!.followOn('search', job.searchNext.jobId, { ...job.searchNext.request, ...probe.ref }).added]);
    clock?.('handOn', performance.now() - th);
  }
  const sealedEmbedding = handoff.sealer.sealEmbedding(r.embedding, job.resultSalt);
  return { ok: true, sealedEmbedding, engineVersion: FACE_ENGINE_VERSION, ms: elapsed(t0) };
}

export async function startFaceWorker(config: Config, opts: { logger?: Logger } = {}): Promise<RunningFaceWorker> {
  const logger = opts.logger ?? createLogger({ level: config.runtime.logLevel, format: config.runtime.logFormat, name: 'face' });
  const modelsDir = path.resolve(ROOT, config.face.modelsDir);
  const t0 = performance.now();
  const loaded = await loadWithProvider(
    (o) => FaceEngine.load(modelsDir, { ...o, intraOpThreads: config.face.intraOpThreads }),
    config.face.executionProvider as ExecutionProvider,
    logger,
  );
  const { engine } = loaded;
  logger.info(
    { modelsDir, engineVersion: FACE_ENGINE_VERSION, intraOpThreads: config.face.intraOpThreads, executionProvider: loaded.provider, loadMs: elapsed(t0) },
    'face engine loaded',
  );

  let runner: Awaited<ReturnType<typeof runQueues<'liveness' | 'embed' | 'light'>>> | undefined;
  let status: StatusServerHandle | undefined;
  const clocks = new WorkerClocks();
  let handoffOnRunner: FaceHandoff | undefined;
  const sealer = new HandoffSealer(keyRingOf(config));
  const handoff = (ctx: JobContext) => (handoffOnRunner ??= new RedisFaceHandoff(ctx.redis, config.redis.prefix, sealer));
  /** Wraps a stage handler with the worker clocks: wait since the job was created, handler time. */
  const clocked =
    <P, R>(queue: string, handler: (payload: P, ctx: JobContext, clock: StepClock) => Promise<R>) =>
    async (payload: P, ctx: JobContext): Promise<R> => {
      const clock = clocks.clock(queue);
      if (ctx.job) clock('waitSinceCreated', Math.max(0, Date.now() - ctx.job.timestamp));
      const t0 = performance.now();
      const c0 = cpuMs();
      try {
        return await handler(payload, ctx, clock);
      } finally {
        clock('handler', performance.now() - t0);
        const q = clocks.byQueue[queue]!;
        q.msByStep['cpuHandler'] = (q.msByStep['cpuHandler'] ?? 0) + cpuMs() - c0;
        clocks.job(queue);
      }
    };
  try {
    runner = await runQueues(
      config,
      ['liveness', 'embed', 'light'],
      {
        liveness: clocked('liveness', (job: LivenessJob, ctx, clock) => livenessHandler(engine, handoff(ctx), job, ctx.deadlineAt, clock, ctx)),
        embed: clocked('embed', (job: EmbedJob, ctx, clock) =>
          embedHandler(engine, handoff(ctx), job, clock, { followOn: ctx.followOn, deadlineAt: ctx.deadlineAt }),
        ),
        light: clocked('light', (job: LightJob, ctx, clock) => lightHandler(engine, handoff(ctx), job, clock)),
      },
      { logger, concurrency: config.face.workerConcurrency },
    );
    const stats = runner.stats;
    status = await startStatusServer(config.face.enginePort, config.http.host, {
      '/version': () => ({
        body: {
          version: FACE_ENGINE_VERSION,
          models: FACE_MODELS.map((m) => ({ name: m.name, role: m.role, file: m.file, sha256: m.sha256 })),
          intraOpThreads: engine.intraOpThreads,
          executionProvider: loaded.provider,
        },
      }),
      '/metrics': () => ({ body: null, text: providerMetric(loaded) }),
      '/clocks': () => ({ body: { pid: process.pid, cpuMs: cpuMs(), ...clocks.byQueue } }),
      '/health': () => ({
        body: { status: 'ok', engineVersion: FACE_ENGINE_VERSION, executionProvider: loaded.provider, concurrency: config.face.workerConcurrency, jobs: stats },
      }),
    });
  } catch (e) {
    await runner?.close();
    await engine.release().catch(() => {});
    throw e;
  }
  logger.info({ url: status.url }, 'face worker ready');

  let closing: Promise<void> | undefined;
  return {
    url: status.url,
    close: () =>
      (closing ??= (async () => {
        await runner!.close(); // running jobs finish first
        await status!.close();
        await engine.release().catch(() => {});
      })()),
  };
}

type StatusServerHandle = Awaited<ReturnType<typeof startStatusServer>>;
