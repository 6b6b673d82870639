/**
 * The face operations the routes call (/identify, /verify/self, verify-face). Every stage runs in a
 * worker through the queues (platform/face-path/job-client.ts); this module turns the results into the SPEC's
 * outcomes and codes:
 *
 * - an upload that is not a decodable JPEG/PNG/WebP (or is over the pixel limit): AppError 400
 *   `invalid_image` (never a 500);
 * - `no_face`, `multiple_faces`, `liveness_failed`, `face_mismatch` / `no_match`: OUTCOMES returned
 *   as values, which the routes map (200 with an outcome for /identify and /verify/self, 422 for
 *   verify-face);
 * - no worker answering in time: AppError 503 `face_engine_unavailable` (the job is withdrawn and
 *   never runs later); Redis down: 503 `dependency_unavailable`.
 *
 * Time budget: one call (identify, verify...) gets FACE_JOB_TIMEOUT_MS in all, shared by its stages,
 * so the caller answers within that time whatever stage stalls. Each stage's own milliseconds, as
 * measured by the worker, are returned (SearchLog.latencyMs) and recorded in the stage histogram.
 *
 * The upload is normalised once, here (EXIF rotation, bounded size, metadata-free JPEG); that small
 * JPEG reaches the liveness worker sealed, as a Redis value beside the job (platform/face-path/handoff.ts).
 * The routes' captures run as one chain (`chain`): the API adds the liveness job, the workers add the
 * embed and search jobs that follow it; `analyseCapture` / `embedCapture` run one stage at a time.
 * Nothing here logs an image or an embedding.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';
import { newHandoffSalt, type HandoffSealer } from '../../platform/face-path/sealing.js';
import { handoffKey, newHandoffRef } from '../../platform/face-path/handoff.js';
import { searchEmbeddingValue } from '../../platform/face-path/search-embedding.js';
import { JobTimeoutError, type JobClient } from '../../platform/face-path/job-client.js';
import type {
  DetectedFace,
  JobContracts,
  LightFrameResult,
  LivenessJobResult,
  QueueName,
  SearchHit,
  SearchRequest,
  SearchResult,
} from '../../platform/jobs/index.js';
import type { QualityAssessment, QualitySummary } from '../../platform/face/quality.js';
import type { Logger } from '../../platform/logger.js';
import type { EmbeddingsRepository, StoredEmbedding } from './embeddings-repository.js';
import { encodeNormalisedJpeg, jpegAsItCame, normaliseUpload, normaliseUploadRgb, uploadForJob, type NormalisedImage } from '../../platform/face/image.js';
import { isFaceError } from '../../platform/face/face-error.js';
import type { FaceMode } from '../../platform/face/liveness.js';
import { cosine } from '../../platform/face/embeddings.js';
import { FACE_ENGINE_VERSION } from '../../platform/face/face-models.js';
import { searchShards } from '../../platform/face-path/shard-search.js';
import type { Candidate, LatencyMs } from '../../models/index.js';
import type { Metrics } from '../../platform/metrics.js';

export interface FaceServiceDeps {
  config: Config;
  embeddings: EmbeddingsRepository;
  jobs: JobClient;
  /** Seals what crosses Redis to the workers and opens what comes back (the process's key ring). */
  sealer: HandoffSealer;
  metrics: Metrics;
  logger?: Logger;
}

/** A raw upload, or an image this service already normalised (a capture reused). */
export type CaptureInput = Buffer | NormalisedImage;

export type CaptureAnalysis =
  | {
      /** `ok`: one face chosen and live; `liveness_failed`: chosen but below LIVENESS_THRESHOLD. */
      outcome: 'ok' | 'liveness_failed';
      image: NormalisedImage;
      face: DetectedFace;
      /**
       * Ref of the face the liveness stage aligned (sealed, in Redis), and the salt of its key: what the
       * embed stage takes. null for a capture that failed liveness (nothing embeds it).
       */
      alignedFace: { ref: string; salt: string } | null;
      faceCount: number;
      livenessScore: number;
      /** Advisory capture quality of the chosen face; null from a worker that does not measure it. */
      quality: QualityAssessment | null;
      ms: number;
    }
  /** `quality`: on `no_face`, whether the whole photo is too dark, too bright or too blurred; else null. */
  | { outcome: 'no_face' | 'multiple_faces'; image: NormalisedImage; faceCount: number; quality: QualitySummary | null; ms: number };

export type AnalysedFace = Extract<CaptureAnalysis, { face: DetectedFace }>;

/** A face was chosen (live or not). */
export const hasFace = (a: CaptureAnalysis): a is AnalysedFace => a.outcome === 'ok' || a.outcome === 'liveness_failed';

export interface CaptureEmbedding {
  /** 512 floats, L2-normalised. */
  embedding: number[];
  engineVersion: string;
  ms: number;
}

export interface IdentifyResult {
  outcome: 'match' | 'no_match' | 'liveness_failed' | 'no_face';
  /** At or above IDENTIFY_MATCH_THRESHOLD, best first, at most IDENTIFY_MAX_CANDIDATES; rank from 1. */
  candidates: Candidate[];
  /** The 1:N threshold the candidates were cut at (IDENTIFY_MATCH_THRESHOLD). */
  threshold: number;
  /** Capture quality of the probe's chosen face; on no_face that of the whole photo (exposure, sharpness). */
  quality: QualityAssessment | QualitySummary | null;
  latencyMs: LatencyMs;
  /** Best score found (also below the threshold), for SearchLog.topScore; null without a search. */
  topScore: number | null;
  livenessScore: number | null;
  faceCount: number;
  engineVersion: string | null;
}

export interface SelfVerification {
  outcome: 'match' | 'no_match' | 'liveness_failed' | 'no_face' | 'multiple_faces';
  /** Cosine with the user's canonical embedding; null when not compared (or none is stored). */
  score: number | null;
  /** Why score is null after a comparison: the user has no canonical embedding of this engine version. */
  reason?: 'no_embedding' | 'engine_version_mismatch';
  livenessScore: number | null;
  /** The live capture's embedding, when computed (a high-confidence match refreshes the canonical one). */
  embedding: CaptureEmbedding | null;
  /** Capture quality of the chosen face; on no_face that of the whole photo (exposure, sharpness). */
  quality: QualityAssessment | QualitySummary | null;
  latencyMs: LatencyMs;
}

export interface PhotoVerification {
  outcome: 'match' | 'face_mismatch' | 'liveness_failed' | 'no_face' | 'multiple_faces';
  score: number | null;
  livenessScore: number | null;
  /** The live capture (normalised image, face) and its embedding, when the live face was usable. */
  capture: AnalysedFace | null;
  embedding: CaptureEmbedding | null;
  /** Capture quality of the live capture's face (also on liveness_failed); on no_face that of the whole photo. */
  quality: QualityAssessment | QualitySummary | null;
  /** Stages of the live capture; `registryPhoto`: both stages on the registry photo; no search stage. */
  latencyMs: LatencyMs & { registryPhoto: number | null };
}

const round4 = (x: number) => Math.round(x * 1e4) / 1e4;

/**
 * The one comparison of a capture's embedding with a reference (a user's canonical embedding for
 * /verify/self and the cross-registry check, the registry photo's for verify-face): their cosine,
 * clamped to [-1, 1], to 4 decimals; the routes compare it with FACE_MATCH_THRESHOLD.
 */
export function comparisonScore(probe: ArrayLike<number>, reference: ArrayLike<number>): number {
  return round4(Math.max(-1, Math.min(1, cosine(probe, reference))));
}

/** A 1:1 comparison's answer. score null: the user has no canonical embedding of this engine version. */
export interface Comparison {
  score: number | null;
  reason?: 'no_embedding' | 'engine_version_mismatch';
  ms: number;
}
const since = (t0: number) => Math.round(performance.now() - t0);

export class FaceService {
  constructor(private readonly deps: FaceServiceDeps) {}

  /**
   * With search shards (SEARCH_SHARDS > 1) a 1:N search is broadcast to every shard from here and the
   * shards' exact top-k merged (platform/face-path/shard-search.ts), after the capture's stages; a 1:1
   * comparison is made here (one row from PostgreSQL, one dot product): no shard holds every row, and
   * no shard serves the single index's `search` queue.
   */
  private get sharded(): boolean {
    return this.deps.config.search.shards > 1;
  }

  private budget(): number {
    return Date.now() + this.deps.config.queues.faceJobTimeoutMs;
  }

  /** Runs one job within what is left of the call's time budget. */
  private async job<Q extends QueueName>(
    queue: Q,
    payload: JobContracts[Q]['payload'],
    deadlineAt: number,
    withValues?: { key: string; value: Buffer }[],
    admitted = false,
  ): Promise<JobContracts[Q]['result']> {
    const remaining = deadlineAt - Date.now();
    if (remaining <= 0) throw new JobTimeoutError(queue, this.deps.config.queues.faceJobTimeoutMs, false);
    return this.deps.jobs.run(queue, payload, { timeoutMs: remaining, withValues, admitted });
  }

  /**
   * The fail-fast gate for a capture's stages (liveness with its embed, and search when `withSearch`,
   * light when `withLight`: a liveness session's light frames; 'knn' for a 1:N search, which with
   * shards is the shards' gate): 503 at once when no worker is alive on one of them. Asked before an
   * upload is normalised, once per call: a caller that asked it passes `admitted` to the capture's
   * method, which does not ask again.
   */
  async admitCapture(withSearch: boolean | 'knn', withLight = false): Promise<void> {
    // The embed stage of a capture runs in the face process that takes its liveness job (no embed job).
    if (this.sharded) {
      // No shard serves the `search` queue: a 1:N search ('knn') needs a live replica of every shard
      // (their consumer groups, not a queue).
      await Promise.all([
        this.deps.jobs.admit(withLight ? ['liveness', 'light'] : ['liveness']),
        withSearch === 'knn' ? this.deps.jobs.admitShards(this.deps.config.search.shards) : undefined,
      ]);
      return;
    }
    await this.deps.jobs.admit(withSearch ? ['liveness', 'search'] : withLight ? ['liveness', 'light'] : ['liveness']);
  }

  /**
   * Normalises an upload once (EXIF rotation, bounded size, JPEG); 400 `invalid_image` otherwise.
   * `maxPixels`: a tighter limit than MAX_IMAGE_PIXELS (a consumer's selfie: SELFIE_MAX_PIXELS), read
   * from the header before any pixel is decoded. `maxSide`: a smaller longest side than the default
   * (a liveness session's light frames).
   */
  async normalise(input: CaptureInput, opts: { maxPixels?: number; maxSide?: number } = {}): Promise<NormalisedImage> {
    if (!Buffer.isBuffer(input)) return input;
    try {
      return await normaliseUpload(input, {
        maxPixels: Math.min(opts.maxPixels ?? Infinity, this.deps.config.http.maxImagePixels),
        ...(opts.maxSide ? { maxSide: opts.maxSide } : {}),
      });
    } catch (e) {
      if (isFaceError(e)) throw new AppError('invalid_image', e.message);
      throw e;
    }
  }

  /**
   * A capture that is never stored (a /verify/self selfie, an /identify probe) as its face job carries
   * it: a JPEG within the normalised size as it came (its header checked here, its pixels decoded once,
   * in the face process: platform/face/image.ts `uploadForJob`), any other upload normalised as
   * `normalise` does. Its metadata crosses Redis sealed for the job's seconds, as a light frame's does.
   * 400 `invalid_image` as `normalise`, or from the face process for a JPEG that fails past its header.
   */
  async jobImage(input: CaptureInput, opts: { maxPixels?: number } = {}): Promise<NormalisedImage> {
    if (!Buffer.isBuffer(input)) return input;
    try {
      return await uploadForJob(input, { maxPixels: Math.min(opts.maxPixels ?? Infinity, this.deps.config.http.maxImagePixels) });
    } catch (e) {
      if (isFaceError(e)) throw new AppError('invalid_image', e.message);
      throw e;
    }
  }

  /**
   * A light frame of a liveness session as the JPEG its light job carries (at most `maxSide`): the
   * upload as it came when it is a JPEG no larger (the console's frames: checked by its header, not
   * decoded here; the face process decodes it and measures it), otherwise normalised as `normalise`
   * does and encoded from its pixels. 400 `invalid_image` as `normalise`.
   */
  async lightFrameJpeg(input: Buffer, opts: { maxPixels?: number; maxSide: number }): Promise<Buffer> {
    const limits = { maxPixels: Math.min(opts.maxPixels ?? Infinity, this.deps.config.http.maxImagePixels), maxSide: opts.maxSide };
    try {
      const asItCame = await jpegAsItCame(input, limits);
      if (asItCame) return asItCame;
      const pixels = await normaliseUploadRgb(input, limits);
      return pixels.jpeg ?? (await encodeNormalisedJpeg(pixels));
    } catch (e) {
      if (isFaceError(e)) throw new AppError('invalid_image', e.message);
      throw e;
    }
  }

  /**
   * The liveness stage on a capture: normalise (once), detect, choose the face ('single': several
   * clear faces give `multiple_faces`; 'largest': the largest face), landmarks, anti-spoof score.
   */
  async analyseCapture(
    input: CaptureInput,
    mode: FaceMode,
    deadlineAt = this.budget(),
    /** Below this liveness score the aligned face is not kept for an embed stage (a registry photo: 0). */
    handOffMinLiveness = this.deps.config.face.livenessThreshold,
  ): Promise<CaptureAnalysis> {
    const image = await this.normalise(input);
    const resultSalt = newHandoffSalt();
    // The image goes to the worker as a sealed Redis value beside the job (platform/face-path/handoff.ts).
    const imageRef = newHandoffRef();
    const imageValue = { key: handoffKey(this.deps.config.redis.prefix, 'image', imageRef), value: this.deps.sealer.seal(image.jpeg, resultSalt) };
    const r = await this.job('liveness', { imageRef, mode, resultSalt, handOffMinLiveness }, deadlineAt, [imageValue]);
    return this.livenessAnswer(r, image, resultSalt);
  }

  /**
   * One frame among several (a liveness session): the liveness stage and, for a frame with a face,
   * its embedding, as one chain — the embed starts on another face process before this frame's
   * anti-spoof model runs, without a trip back through the API — whatever its passive score: the
   * caller decides from all the frames together (a session's light frames: `analyseLightFrames`).
   */
  async analyseAndEmbed(
    image: NormalisedImage,
    mode: FaceMode,
    deadlineAt: number,
    /** The caller asked the gate for this call (`admitCapture`): one admission per call, not per frame. */
    admitted = false,
  ): Promise<{ analysis: CaptureAnalysis; embedding?: CaptureEmbedding }> {
    return this.chain(image, mode, deadlineAt, { requireLive: false, admitted });
  }

  /**
   * A liveness session's light frames, or a run of them (JPEGs, made small by the caller: `lightFrameJpeg`), as one job
   * on a face process (platform/jobs/light.ts): each frame's face found (detected on the first,
   * followed on the others), measured (its grid, its colour sample) and, with `embed`, every frame's
   * face embedded (null for a frame without one). A frame the engine cannot decode is `invalid_image` in `frames` (the caller
   * refuses the call; the other frames of its job are `not_examined`).
   */
  async analyseLightFrames(
    jpegs: readonly Buffer[],
    embed: boolean,
    deadlineAt: number,
    /** As for `analyseAndEmbed`. */
    admitted = false,
  ): Promise<{ frames: LightFrameResult[]; embeddings: (CaptureEmbedding | null)[]; ms: number }> {
    const resultSalt = newHandoffSalt();
    const embedSalt = newHandoffSalt();
    const refs = jpegs.map(() => newHandoffRef());
    const values = jpegs.map((jpeg, i) => ({
      key: handoffKey(this.deps.config.redis.prefix, 'image', refs[i]!),
      value: this.deps.sealer.seal(jpeg, resultSalt),
    }));
    const r = await this.job('light', { imageRefs: refs, resultSalt, embed, embedSalt }, deadlineAt, values, admitted);
    const embeddings = r.embeddings.map((e) =>
      e ? { embedding: this.deps.sealer.openEmbedding(e.sealedEmbedding, embedSalt), engineVersion: e.engineVersion, ms: r.ms } : null,
    );
    return { frames: r.frames, embeddings, ms: r.ms };
  }

  /**
   * The stages of one capture as one chain (identify, /verify/self, verify-face): the API adds the
   * liveness job only; the face process that takes it embeds the face itself as soon as it is aligned
   * (before its anti-spoof model runs) and adds the search job with the embedding when `search` is
   * given, which runs on the search process while the liveness stage finishes (platform/jobs:
   * `embedNext`, `searchNext`). The embed stage has no job: its reply comes with the liveness job's.
   * The API awaits the results on its reply list as they come. Without a face, and (`requireLive`) below
   * LIVENESS_THRESHOLD, it answers at once: the embed (and search) that may already run for the
   * capture are dropped unread. A registry photo (`requireLive` false) is embedded whatever its score.
   */
  private async chain(
    input: CaptureInput,
    mode: FaceMode,
    deadlineAt: number,
    opts: {
      search?: SearchRequest | Promise<SearchRequest>;
      requireLive: boolean;
      admitted?: boolean;
      /** The caller searches the shards with the embedding afterwards (their gate is asked with the stages'). */
      shardedSearch?: boolean;
      /** The upload is never stored: a JPEG within the normalised size goes to the job as it came (`jobImage`). */
      transient?: boolean;
    },
  ): Promise<{ analysis: CaptureAnalysis; embedding?: CaptureEmbedding; search?: SearchResult }> {
    // The gate first (unless the caller asked it for this call): with no worker alive the answer is a
    // 503 in milliseconds, not after the upload's normalisation (a large photo, on a busy or cold
    // process, takes seconds). Once: `start` is told.
    if (!opts.admitted) await this.admitCapture(opts.shardedSearch ? 'knn' : opts.search !== undefined);
    const [image, request] = await Promise.all([opts.transient ? this.jobImage(input) : this.normalise(input), opts.search]);
    const remaining = deadlineAt - Date.now();
    if (remaining <= 0) throw new JobTimeoutError('liveness', this.deps.config.queues.faceJobTimeoutMs, false);
    const resultSalt = newHandoffSalt();
    const embedSalt = newHandoffSalt();
    const imageRef = newHandoffRef();
    const ids = { embed: randomUUID(), search: randomUUID() };
    const run = await this.deps.jobs.start(
      'liveness',
      {
        imageRef,
        mode,
        resultSalt,
        handOffMinLiveness: opts.requireLive ? this.deps.config.face.livenessThreshold : 0,
        embedNext: { jobId: ids.embed, resultSalt: embedSalt, ...(request ? { searchNext: { jobId: ids.search, request } } : {}) },
      },
      {
        timeoutMs: remaining,
        withValues: [{ key: handoffKey(this.deps.config.redis.prefix, 'image', imageRef), value: this.deps.sealer.seal(image.jpeg, resultSalt) }],
        followOns: [{ queue: 'embed', jobId: ids.embed }, ...(request ? [{ queue: 'search' as const, jobId: ids.search }] : [])],
        admitted: true,
      },
    );
    try {
      const analysis = this.livenessAnswer(await run.result('liveness', run.jobId), image, null);
      if (!hasFace(analysis) || (opts.requireLive && analysis.outcome !== 'ok')) return { analysis };
      const e = await run.result('embed', ids.embed);
      this.deps.metrics.stage('embed', e.ms);
      if (!e.ok) throw new AppError('invalid_image', 'The image could not be decoded');
      const embedding = { embedding: this.deps.sealer.openEmbedding(e.sealedEmbedding, embedSalt), engineVersion: e.engineVersion, ms: e.ms };
      if (!request) return { analysis, embedding };
      const s = await run.result('search', ids.search);
      this.deps.metrics.stage('search', s.ms);
      return { analysis, embedding, search: s };
    } finally {
      run.abandon();
    }
  }

  /** A liveness job's result as the capture's analysis (400 for an undecodable image). */
  private livenessAnswer(r: LivenessJobResult, image: NormalisedImage, alignedFaceSalt: string | null): CaptureAnalysis {
    this.deps.metrics.stage('liveness', r.ms);
    if (!r.ok) {
      if (r.code === 'invalid_image') throw new AppError('invalid_image', 'The image could not be decoded');
      return { outcome: r.code, image, faceCount: r.faceCount, quality: r.quality ?? null, ms: r.ms };
    }
    const live = r.livenessScore >= this.deps.config.face.livenessThreshold;
    return {
      outcome: live ? 'ok' : 'liveness_failed',
      image,
      face: r.face,
      alignedFace: r.alignedFaceRef === null || alignedFaceSalt === null ? null : { ref: r.alignedFaceRef, salt: alignedFaceSalt },
      faceCount: r.faceCount,
      livenessScore: r.livenessScore,
      quality: r.quality ?? null,
      ms: r.ms,
    };
  }

  /**
   * The embed stage on an analysed capture: the 512-d L2-normalised embedding of the face the liveness
   * stage aligned (left sealed in Redis for the embed worker: the image is not sent again, nor decoded
   * again). Once per capture: the embed worker takes the aligned face as it reads it.
   */
  async embedCapture(capture: AnalysedFace, deadlineAt = this.budget()): Promise<CaptureEmbedding> {
    if (!capture.alignedFace) throw new Error('embedCapture: this capture kept no aligned face (it failed liveness)');
    const resultSalt = newHandoffSalt();
    const r = await this.job('embed', { alignedFaceRef: capture.alignedFace.ref, alignedFaceSalt: capture.alignedFace.salt, resultSalt }, deadlineAt);
    this.deps.metrics.stage('embed', r.ms);
    if (!r.ok) throw new AppError('invalid_image', 'The image could not be decoded');
    return { embedding: this.deps.sealer.openEmbedding(r.sealedEmbedding, resultSalt), engineVersion: r.engineVersion, ms: r.ms };
  }

  /**
   * k-NN over the canonical embeddings, on whichever search replica takes the job, after it has
   * applied every embedding write that answered before this call (read-your-writes).
   */
  async searchByEmbedding(
    embedding: number[],
    k: number,
    deadlineAt = this.budget(),
    /** The change-log position read at the call's start or later (read-your-writes); read now if not given. */
    minSeqRead?: Promise<string>,
    /** A user left out of the hits (the one linking, in a duplicate check). */
    excludeUserId?: string,
  ): Promise<{ hits: SearchHit[]; appliedSeq: string; indexSize: number; ms: number }> {
    const minSeq = await (minSeqRead ?? this.deps.embeddings.currentSeq());
    if (this.sharded) {
      const { config, jobs, sealer } = this.deps;
      const r = await searchShards(
        { jobs, sealer, redisPrefix: config.redis.prefix, shards: config.search.shards, shardTimeoutMs: config.search.shardTimeoutMs },
        { embedding, k, minSeq, ...(excludeUserId ? { excludeUserId } : {}) },
        deadlineAt,
      );
      this.deps.metrics.stage('search', r.ms);
      return r;
    }
    // The embedding goes sealed beside the job, not in it (platform/face-path/search-embedding.ts).
    const probe = searchEmbeddingValue(this.deps.config.redis.prefix, this.deps.sealer, embedding);
    const r = await this.job('search', { op: 'knn', ...probe.ref, k, minSeq, ...(excludeUserId ? { excludeUserId } : {}) }, deadlineAt, [probe.value]);
    if (r.op !== 'knn') throw new Error('search worker answered another op');
    this.deps.metrics.stage('search', r.ms);
    return { hits: r.hits, appliedSeq: r.appliedSeq, indexSize: r.indexSize, ms: r.ms };
  }

  /** 1:N: the largest face of the probe against every canonical embedding. */
  async identify(probe: CaptureInput): Promise<IdentifyResult> {
    const t0 = performance.now();
    const deadlineAt = this.budget();
    const { config } = this.deps;
    // Every write answered before this call is at or below the position read now (read-your-writes);
    // read while the upload is normalised, it costs the call no wait.
    const request = this.deps.embeddings.currentSeq().then((minSeq): SearchRequest => ({ op: 'knn', k: config.face.identifyMaxCandidates, minSeq }));
    const chained = await this.chain(probe, 'largest', deadlineAt, {
      search: this.sharded ? undefined : request,
      requireLive: true,
      shardedSearch: this.sharded,
      transient: true, // the probe is never stored
    });
    const { analysis: a, embedding: e } = chained;
    let search = chained.search;
    if (this.sharded && a.outcome === 'ok' && e) {
      const minSeq = request.then((r) => (r.op === 'knn' ? r.minSeq : '0'));
      search = { op: 'knn', ...(await this.searchByEmbedding(e.embedding, config.face.identifyMaxCandidates, deadlineAt, minSeq)) };
    }
    const threshold = config.face.identifyMatchThreshold;
    const base = { candidates: [] as Candidate[], topScore: null, faceCount: a.faceCount, threshold, quality: a.quality };
    if (!hasFace(a)) {
      // 'largest' never refuses several faces; a photo without a face is `no_face`.
      return {
        ...base,
        outcome: 'no_face',
        livenessScore: null,
        engineVersion: null,
        latencyMs: { liveness: a.ms, embed: null, search: null, total: since(t0) },
      };
    }
    if (a.outcome === 'liveness_failed' || !e || search?.op !== 'knn') {
      return {
        ...base,
        outcome: 'liveness_failed',
        livenessScore: a.livenessScore,
        engineVersion: null,
        latencyMs: { liveness: a.ms, embed: null, search: null, total: since(t0) },
      };
    }
    const scored = search.hits.map((h) => ({ userId: h.userId, score: round4(h.score) }));
    const candidates = scored
      .filter((h) => h.score >= threshold)
      .slice(0, config.face.identifyMaxCandidates)
      .map((h, i) => ({ ...h, rank: i + 1 }));
    return {
      outcome: candidates.length > 0 ? 'match' : 'no_match',
      candidates,
      threshold,
      quality: a.quality,
      topScore: scored[0]?.score ?? null,
      livenessScore: a.livenessScore,
      faceCount: a.faceCount,
      engineVersion: e.engineVersion,
      latencyMs: { liveness: a.ms, embed: e.ms, search: search.ms, total: since(t0) },
    };
  }

  /**
   * 1:1 against a user's canonical embedding, in this process: one row from PostgreSQL (always
   * current, the primary's), one `comparisonScore`. score null: none stored of this engine version.
   * (Not a search job: a hop to a search process and back for one dot product cost a BullMQ job,
   * about 55 Redis commands, docs/performance.md.)
   */
  async compareWithUser(embedding: ArrayLike<number>, userId: string, stored?: { row: StoredEmbedding | undefined; ms: number }): Promise<Comparison> {
    return this.compareWithStored(embedding, stored ? Promise.resolve(stored) : this.storedOf(userId));
  }

  /** The user's canonical embedding, read once, timed: what `compareWithStored` compares against. */
  private storedOf(userId: string): Promise<{ row: StoredEmbedding | undefined; ms: number }> {
    const t0 = performance.now();
    return this.deps.embeddings.find(userId).then((row) => ({ row, ms: Math.round((performance.now() - t0) * 1000) / 1000 }));
  }

  private async compareWithStored(embedding: ArrayLike<number>, stored: Promise<{ row: StoredEmbedding | undefined; ms: number }>): Promise<Comparison> {
    const { row, ms } = await stored;
    if (!row) return { score: null, reason: 'no_embedding', ms };
    if (row.engineVersion !== FACE_ENGINE_VERSION) return { score: null, reason: 'engine_version_mismatch', ms };
    this.deps.metrics.stage('search', ms);
    return { score: comparisonScore(embedding, row.embedding), ms };
  }

  /** /verify/self: a live capture against the user's canonical embedding (`mode` chooses the face). */
  async verifyAgainstUser(
    liveUpload: CaptureInput,
    userId: string,
    mode: FaceMode = 'single',
    /**
     * `admitted`: the caller asked admitCapture(true) for this call. `stored`: the user's canonical
     * embedding as the caller read it for this call (with the read's ms), not read again.
     */
    opts: { admitted?: boolean; stored?: { row: StoredEmbedding | undefined; ms: number } } = {},
  ): Promise<SelfVerification> {
    const t0 = performance.now();
    const deadlineAt = this.budget();
    // The reference is read while the capture's stages run (unless given); compared here, as verify-face's is.
    const stored = opts.stored ? Promise.resolve(opts.stored) : this.storedOf(userId);
    stored.catch(() => {}); // awaited below unless the capture already decided
    const { analysis: a, embedding: e } = await this.chain(liveUpload, mode, deadlineAt, { requireLive: true, admitted: opts.admitted === true });
    const c = a.outcome === 'ok' && e ? await this.compareWithStored(e.embedding, stored) : null;
    if (a.outcome !== 'ok' || !e || !c) {
      return {
        outcome: a.outcome === 'ok' ? 'liveness_failed' : a.outcome,
        score: null,
        livenessScore: a.outcome === 'liveness_failed' ? a.livenessScore : null,
        embedding: null,
        quality: a.quality,
        latencyMs: { liveness: a.ms, embed: null, search: null, total: since(t0) },
      };
    }
    const score = c.score;
    return {
      outcome: score !== null && score >= this.deps.config.face.matchThreshold ? 'match' : 'no_match',
      score,
      ...(c.reason ? { reason: c.reason } : {}),
      livenessScore: a.livenessScore,
      embedding: e,
      quality: a.quality,
      latencyMs: { liveness: a.ms, embed: e.ms, search: c.ms, total: since(t0) },
    };
  }

  /**
   * The registry photo's largest face, embedded (no liveness decision: it is a photograph by nature).
   * A photo without a usable face is the registry's fault: 502 `registry_unavailable` (details.reason
   * `registry_photo_unusable`), never a face outcome of the user's capture. `ms`: both its stages.
   */
  private async embedRegistryPhoto(registryPhoto: Buffer, deadlineAt: number, admitted = false): Promise<CaptureEmbedding> {
    const unusable = (why: string) =>
      new AppError('registry_unavailable', 'The registry photo has no usable face', { details: { reason: 'registry_photo_unusable', why } });
    let image: NormalisedImage;
    try {
      image = await this.normalise(registryPhoto);
    } catch (e) {
      if (e instanceof AppError && e.code === 'invalid_image') throw unusable('invalid_image');
      throw e;
    }
    const { analysis, embedding } = await this.chain(image, 'largest', deadlineAt, { requireLive: false, admitted });
    if (!hasFace(analysis) || !embedding) throw unusable(analysis.outcome);
    return { ...embedding, ms: analysis.ms + embedding.ms };
  }

  /**
   * A reference photograph's largest face, embedded (no liveness decision: a watch-list photo is a
   * photograph by nature). A photo without a face is 422 `no_face`.
   */
  async embedPhoto(photo: Buffer): Promise<CaptureEmbedding> {
    const { analysis, embedding } = await this.chain(photo, 'largest', this.budget(), { requireLive: false });
    if (!hasFace(analysis) || !embedding) throw new AppError('no_face', 'No face was found in the photo', { extra: { outcome: 'no_face' } });
    return { ...embedding, ms: analysis.ms + embedding.ms };
  }

  /** verify-face with reuseCapture: an earlier capture's embedding against a (new) registry photo. */
  async verifyEmbeddingAgainstPhoto(
    embedding: number[],
    registryPhoto: Buffer,
  ): Promise<{ outcome: 'match' | 'face_mismatch'; score: number; engineVersion: string }> {
    const reg = await this.embedRegistryPhoto(registryPhoto, this.budget());
    const score = comparisonScore(embedding, reg.embedding);
    return { outcome: score >= this.deps.config.face.matchThreshold ? 'match' : 'face_mismatch', score, engineVersion: reg.engineVersion };
  }

  /**
   * verify-face: the live capture ('single', liveness checked) against the registry's photo
   * ('largest', no liveness: it is a photograph by nature); cosine of the two embeddings.
   * A registry photo without a usable face is the registry's fault: 502 `registry_unavailable`
   * (details.reason `registry_photo_unusable`), never a face outcome of the user's capture.
   */
  async verifyAgainstPhoto(
    liveUpload: CaptureInput,
    registryPhoto: Buffer,
    /** `admitted`: the caller asked admitCapture(false) for this call. */
    opts: { admitted?: boolean } = {},
  ): Promise<PhotoVerification> {
    const t0 = performance.now();
    const deadlineAt = this.budget();
    const admitted = opts.admitted === true;
    const registry = this.embedRegistryPhoto(registryPhoto, deadlineAt, admitted);
    registry.catch(() => {}); // awaited below unless the live capture already decided

    // The live capture in parallel with the registry photo; its outcome comes first.
    const { analysis: live, embedding: liveEmb } = await this.chain(liveUpload, 'single', deadlineAt, { requireLive: true, admitted });
    if (live.outcome !== 'ok' || !liveEmb) {
      return {
        outcome: live.outcome === 'ok' ? 'liveness_failed' : live.outcome,
        score: null,
        livenessScore: live.outcome === 'liveness_failed' ? live.livenessScore : null,
        capture: null,
        embedding: null,
        quality: live.quality,
        latencyMs: { liveness: live.ms, embed: null, search: null, total: since(t0), registryPhoto: null },
      };
    }
    const reg = await registry;
    const score = comparisonScore(liveEmb.embedding, reg.embedding);
    return {
      outcome: score >= this.deps.config.face.matchThreshold ? 'match' : 'face_mismatch',
      score,
      livenessScore: live.livenessScore,
      capture: live,
      embedding: liveEmb,
      quality: live.quality,
      latencyMs: { liveness: live.ms, embed: liveEmb.ms, search: null, total: since(t0), registryPhoto: Math.round(reg.ms) },
    };
  }
}
