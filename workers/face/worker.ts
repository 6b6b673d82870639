/**
 * The face worker (Procfile `face`): loads the four ONNX models once, serves the `liveness` and
 * `embed` queues, and answers `GET /version` and `GET /health` on FACE_ENGINE_PORT for the API's
 * `/models` and `/health`.
 *
 * Face outcomes of the photo (`invalid_image`, `no_face`, `multiple_faces`) are job results; anything
 * else the engine throws is an engine fault and fails the job (the API answers 503).
 */
import { sealEmbedding } from '../../shared/sealed-embedding.js';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { Config } from '../../shared/config.js';
import { FACE_ENGINE_VERSION, FACE_MODELS } from '../../shared/face-models.js';
import type { EmbedJob, EmbedResult, LivenessJob, LivenessResult } from '../../shared/jobs/index.js';
import { createLogger, type Logger } from '../../shared/logger.js';
import { FaceEngine } from './pipeline/engine.js';
import { isFaceError } from './pipeline/errors.js';
import { runQueues } from '../run-queue.js';
import { startStatusServer } from '../status-server.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface RunningFaceWorker {
  url: string;
  close(): Promise<void>;
}

const elapsed = (t0: number) => Math.round((performance.now() - t0) * 10) / 10;

/** The liveness stage as a job: the engine's call, with photo outcomes turned into results. */
export async function livenessHandler(engine: FaceEngine, job: LivenessJob): Promise<LivenessResult> {
  const t0 = performance.now();
  try {
    const r = await engine.liveness(Buffer.from(job.imageB64, 'base64'), job.mode);
    return {
      ok: true,
      face: {
        box: r.face.box,
        detScore: r.face.detScore,
        landmarks5: r.face.landmarks5.map((p) => [p[0]!, p[1]!] as [number, number]),
      },
      faceCount: r.faceCount,
      livenessScore: r.livenessScore,
      ...(r.quality ? { quality: r.quality } : {}),
      ms: r.ms,
    };
  } catch (e) {
    if (!isFaceError(e)) throw e;
    const counted = e.code === 'multiple_faces' ? Number(/^(\d+) faces/.exec(e.message)?.[1] ?? 2) : 0;
    return { ok: false, code: e.code, faceCount: counted, ms: elapsed(t0) };
  }
}

/** The embed stage as a job. */
export async function embedHandler(engine: FaceEngine, job: EmbedJob): Promise<EmbedResult> {
  const t0 = performance.now();
  try {
    const r = await engine.embed(Buffer.from(job.imageB64, 'base64'), job.landmarks5);
    return { ok: true, sealedEmbedding: sealEmbedding(r.embedding, job.resultKey), engineVersion: FACE_ENGINE_VERSION, ms: r.ms };
  } catch (e) {
    if (isFaceError(e) && e.code === 'invalid_image') return { ok: false, code: 'invalid_image', ms: elapsed(t0) };
    throw e;
  }
}

export async function startFaceWorker(config: Config, opts: { logger?: Logger } = {}): Promise<RunningFaceWorker> {
  const logger = opts.logger ?? createLogger({ level: config.logLevel, name: 'face' });
  const modelsDir = path.resolve(ROOT, config.faceModelsDir);
  const t0 = performance.now();
  const engine = await FaceEngine.load(modelsDir, { intraOpThreads: config.faceIntraOpThreads });
  logger.info({ modelsDir, engineVersion: FACE_ENGINE_VERSION, intraOpThreads: config.faceIntraOpThreads, loadMs: elapsed(t0) }, 'face engine loaded');

  let runner: Awaited<ReturnType<typeof runQueues<'liveness' | 'embed'>>> | undefined;
  let status: StatusServerHandle | undefined;
  try {
    runner = await runQueues(
      config,
      ['liveness', 'embed'],
      {
        liveness: (job) => livenessHandler(engine, job),
        embed: (job) => embedHandler(engine, job),
      },
      { logger, concurrency: config.faceWorkerConcurrency },
    );
    const stats = runner.stats;
    status = await startStatusServer(config.faceEnginePort, config.host, {
      '/version': () => ({
        body: {
          version: FACE_ENGINE_VERSION,
          models: FACE_MODELS.map((m) => ({ name: m.name, role: m.role, file: m.file, sha256: m.sha256 })),
          intraOpThreads: engine.intraOpThreads,
        },
      }),
      '/health': () => ({
        body: { status: 'ok', engineVersion: FACE_ENGINE_VERSION, concurrency: config.faceWorkerConcurrency, jobs: stats },
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
