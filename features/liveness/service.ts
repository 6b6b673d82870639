/**
 * Liveness sessions (SPEC 13.1, 14.1): a server-random challenge over several frames — head poses and
 * a screen-light sequence — judged by the server from the frames alone (features/liveness/decision.ts,
 * light-response.ts), and lent once to verify-face or /verify/self.
 *
 * A frames call, in this order (each answer is final; nothing after it runs):
 * 1. the session is found and the caller's (404), not already given frames (409), no other frames
 *    call of the caller in flight (429 `rate_limited`: a consumer's call takes the face path's per-user
 *    claim, with the biometric lock in the same step — 429 `biometric_locked`; an operator's a claim of
 *    its own), the face queues able to take the work (503), then the session claimed atomically (a
 *    second call never runs) — all before any frame is decoded; then within its lifetime
 *    (`session_expired`; creating a session ends the caller's earlier open ones);
 * 2. the keyed digests of every frame's bytes, pose and light, against every frame received before
 *    (`replayed_frames`), before any frame is decoded; then the timing, also before any decode
 *    (`implausible_timing`: decision.ts `plausibleTiming`); a digest is kept only once its frame decoded;
 * 3. the light frames first, checked small (a console's small JPEG by its header; any other normalised
 *    small) and sent as `light` jobs of at most LIVENESS_LIGHT_JOB_FRAMES frames, which the face
 *    processes take in parallel: the face detected on each job's first frame and followed on the
 *    others, every frame's face embedded; meanwhile each pose frame normalised (SELFIE_MAX_PIXELS) and
 *    sent through the liveness stage, all at once (each face process takes one): detection,
 *    landmarks, the passive score, its embedding started by the face process as soon as its face is
 *    aligned (one chain);
 * 4. one frame that is a near copy of a frame of an earlier session (`replayed_frames`, frame-sketch.ts;
 *    LIVENESS_NEAR_REPLAY_WINDOW_SECONDS, 0 = off); then, on the pose frames, `no_face`,
 *    `multiple_faces`, `static_capture`, every frame compared with the best frontal one
 *    (`different_faces`), `challenge_not_followed`; then the light frames (`light_not_followed`: their
 *    count, every light frame's face the session's person by its embedding, its colour following
 *    `lights`); then `spoof_suspected`;
 * 5. a passed session keeps its best frontal frame (embedding, quality, JPEG; sealed) for its one use.
 *
 * A session claimed and then stopped by an invalid image (400) or by the face path (503) is spent
 * (failed, no reason): the digests of its frames that decoded are remembered, so the client starts a
 * new session with new frames. A consumer's failed session counts as one failed biometric attempt
 * (SPEC 12.1).
 */
import { createHmac, randomInt, randomUUID } from 'node:crypto';
import type { Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';
import type { Logger } from '../../platform/logger.js';
import type { Metrics } from '../../platform/metrics.js';
import type { KeyRing } from '../../platform/keys/key-ring.js';
import { decodeRgb, type NormalisedImage, type RgbImage as RgbPixels } from '../../platform/face/image.js';
import { qualitySummary } from '../../platform/face/quality.js';
import type { Principal } from '../../platform/http/principal.js';
import { LIGHT_FRAME_MAX_SIDE, lightJobRuns, type LightFrameResult } from '../../platform/jobs/index.js';
import {
  hasFace,
  IN_FLIGHT_LEASE_MS,
  type AnalysedFace,
  type BiometricAttemptsService,
  type CaptureAnalysis,
  type CaptureEmbedding,
  type FaceService,
} from '../face/index.js';
import {
  drawSteps,
  judgeFaces,
  onePerson,
  plausibleTiming,
  LIGHT_SAME_PERSON_COSINE,
  type FailureReason,
  type FrameFace,
  type LivenessStep,
} from './decision.js';
import { faceGrid, GRID, nearCopyFrame, nearCopySession, sketch, sketchBands, sketchDirections } from './frame-sketch.js';
import { drawLights, judgeLightResponse, type LightSample } from './light-response.js';
import { LIVENESS_METRICS } from './metrics.js';
import { screenPattern } from './screen-pattern.js';
import type { FrontalFrame, LivenessSessionStore, StoredSession } from './session-store.js';

/** Light frames a frames call may carry (the upload limit): the longest sequence drawn. */
export const MAX_LIGHT_FRAMES = 8;
/** The length of a session's light sequence: 6 to 8 colours (SPEC 14.1). */
const LIGHTS_MIN = 6;
const LIGHTS_MAX = 8;

export interface LivenessDeps {
  config: Config;
  store: LivenessSessionStore;
  face: FaceService;
  biometric: BiometricAttemptsService;
  keyRing: KeyRing;
  metrics: Metrics;
  logger: Logger;
}

export interface CreatedSession {
  session: {
    id: string;
    steps: LivenessStep[];
    /** Absent under LIVENESS_LIGHT=off, as `lightHoldMs`. */
    lights?: string[];
    lightHoldMs?: number;
    expiresAt: string;
    minFrames: number;
    maxFrames: number;
  };
}

export interface JudgedSession {
  session: { id: string; status: 'passed' | 'failed'; reason?: FailureReason; stepsSeen: (LivenessStep | null)[] };
}

/** A frames call's parts: the pose frames (`frames`) and the light frames (`lightFrames`), in order. */
export interface SubmittedFrames {
  frames: Buffer[];
  lightFrames: Buffer[];
}

type Verdict =
  | { status: 'passed'; stepsSeen: (LivenessStep | null)[]; frontal: FrontalFrame }
  | { status: 'failed'; reason: FailureReason; stepsSeen: (LivenessStep | null)[] };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The key ring's purpose the frame digests are computed under (platform/keys/README.md). */
const FRAME_DIGEST_PURPOSE = 'liveness-frame-digests';

export const ownerOf = (p: Principal): string => (p.kind === 'consumer' ? `consumer:${p.userId}` : `operator:${p.operatorId}`);

const notFound = () => new AppError('not_found', 'No such liveness session');
const alreadyJudged = () => new AppError('conflict', 'This liveness session has already been given its frames');

export class LivenessService {
  private readonly digestKey: Buffer;
  private readonly bandKey: Buffer;
  /** The sketch's keyed directions (frame-sketch.ts), drawn on first use: only with the near-copy check on. */
  private directions: Int8Array | null = null;

  constructor(private readonly deps: LivenessDeps) {
    this.digestKey = deps.keyRing.saltedKey(FRAME_DIGEST_PURPOSE, Buffer.from('frames', 'utf8'));
    this.bandKey = deps.keyRing.saltedKey(FRAME_DIGEST_PURPOSE, Buffer.from('frame-sketch-bands', 'utf8'));
    const { mode } = deps.config.liveness;
    const modeGauge = deps.metrics.gauge(LIVENESS_METRICS.mode);
    for (const m of ['passive', 'challenge'] as const) modeGauge.set({ mode: m }, m === mode ? 1 : 0);
    // In production `passive` is only ever set on purpose (the default there is `challenge`): said at
    // every start, so that it is never forgotten in a deployment's settings.
    if (deps.config.isProduction && mode === 'passive')
      deps.logger.warn(
        { setting: 'LIVENESS_MODE', mode },
        'LIVENESS_MODE=passive in production: verify-face and /verify/self accept a single capture, which proves no live person (a photo of a photo can pass the passive model); the default is challenge',
      );
  }

  /** POST /liveness/sessions. */
  async create(principal: Principal): Promise<CreatedSession> {
    const { config, store, metrics } = this.deps;
    const owner = ownerOf(principal);
    const { count, resetInSeconds } = await store.countCreation(owner);
    if (count > config.liveness.sessionsPerHour) {
      metrics.outcome('liveness_session', 'rate_limited');
      throw new AppError('rate_limited', `At most ${config.liveness.sessionsPerHour} liveness sessions per hour; try again later`, {
        retryAfter: resetInSeconds,
      });
    }
    const id = randomUUID();
    const steps = drawSteps((n) => randomInt(n));
    const light = config.liveness.light === 'required';
    const lights = light ? drawLights(LIGHTS_MIN + randomInt(LIGHTS_MAX - LIGHTS_MIN + 1), (n) => randomInt(n)) : null;
    const lightHoldMs = light ? config.liveness.lightHoldMs : null;
    const ttl = config.liveness.sessionTtlSeconds;
    const createdAt = Date.now();
    const expiresAt = createdAt + ttl * 1000;
    // Kept a lifetime longer than it lives: a late frames call is told `session_expired`, not 404.
    await store.create({ id, owner, steps, lights, lightHoldMs, createdAt, expiresAt }, 2 * ttl);
    metrics.outcome('liveness_session', 'created');
    return {
      session: {
        id,
        steps,
        ...(lights ? { lights, lightHoldMs: lightHoldMs! } : {}),
        expiresAt: new Date(expiresAt).toISOString(),
        minFrames: config.liveness.minFrames,
        maxFrames: config.liveness.maxFrames,
      },
    };
  }

  /** POST /liveness/sessions/{id}/frames: the parts in capture order (the route checked their counts' bounds). */
  async submitFrames(
    principal: Principal,
    id: string,
    parts: SubmittedFrames,
    /** When the frames arrived (the server's clock) and the client's claimed capture times, if sent. */
    timing: { receivedAt: number; capturedAt: readonly number[] | null },
  ): Promise<JudgedSession> {
    const { store, biometric } = this.deps;
    if (!UUID.test(id)) throw notFound();
    const session = await store.get(id);
    if (!session || session.owner !== ownerOf(principal)) throw notFound();
    if (session.status !== 'open') throw alreadyJudged();
    // One frames call of a principal at a time (429), the lock with it for a consumer; then the face
    // queues' admission (503) and the session's claim: all before a single frame is decoded.
    const work = () => this.claimAndJudge(principal, session, parts, timing);
    if (principal.kind === 'consumer') return biometric.oneAtATime(principal.userId, 'liveness_session', work);
    return this.operatorOneAtATime(ownerOf(principal), work);
  }

  /** An operator's one frames call at a time (a consumer's is the face path's per-user claim). */
  private async operatorOneAtATime<T>(owner: string, work: () => Promise<T>): Promise<T> {
    const { store, metrics } = this.deps;
    const token = await store.reserveInFlight(owner, IN_FLIGHT_LEASE_MS);
    if (!token) {
      metrics.outcome('liveness_session', 'rate_limited');
      throw new AppError('rate_limited', 'Another liveness frames call of yours is in progress; wait for its answer', { retryAfter: 1 });
    }
    const renew = setInterval(() => void store.renewInFlight(owner, token, IN_FLIGHT_LEASE_MS).catch(() => {}), Math.floor(IN_FLIGHT_LEASE_MS / 3));
    renew.unref();
    try {
      return await work();
    } finally {
      clearInterval(renew);
      await store.releaseInFlight(owner, token).catch(() => {});
    }
  }

  private async claimAndJudge(
    principal: Principal,
    session: StoredSession,
    parts: SubmittedFrames,
    timing: { receivedAt: number; capturedAt: readonly number[] | null },
  ): Promise<JudgedSession> {
    const { store, biometric, face, metrics } = this.deps;
    const { id } = session;
    // With no face process alive the answer is a 503 now, and the session stays open for a retry.
    await face.admitCapture(false, session.lights !== null && parts.lightFrames.length > 0);
    const claimed = await store.claim(id);
    if (!claimed) throw alreadyJudged();
    let verdict: Verdict;
    try {
      verdict = await this.judge({ ...session, expiresAt: claimed.expiresAt }, parts, timing);
    } catch (e) {
      await store
        .fail(
          id,
          null,
          parts.frames.map(() => null),
        )
        .catch(() => {});
      throw e;
    }
    if (verdict.status === 'passed') await store.pass(id, verdict.stepsSeen, verdict.frontal);
    else await store.fail(id, verdict.reason, verdict.stepsSeen);
    metrics.outcome('liveness_session', verdict.status === 'passed' ? 'passed' : verdict.reason);
    if (principal.kind === 'consumer') await biometric.record(principal.userId, 'liveness_session', verdict.status === 'passed' ? 'passed' : 'liveness_failed');
    return {
      session: { id, status: verdict.status, ...(verdict.status === 'failed' ? { reason: verdict.reason } : {}), stepsSeen: verdict.stepsSeen },
    };
  }

  /** The keyed digest of one frame's bytes (hex). */
  frameDigest(frame: Buffer): string {
    return createHmac('sha256', this.digestKey).update(frame).digest('hex');
  }

  /**
   * With LIVENESS_NEAR_REPLAY_WINDOW_SECONDS above 0: remembers the keyed band digests of every face's
   * sketch (frame-sketch.ts), pose and light frames alike, and answers whether one frame is a near copy
   * of a frame of an earlier session (the same pixels sent again with new bytes): one is enough, since
   * a recording's frames can be chosen and mixed with new ones to fit a new challenge; or whether its
   * frames taken together are a near copy of one earlier session (`nearCopySession`: a whole
   * recording re-sent, whose best single frame a strong re-encoding can bring under the per-frame rule).
   */
  private async nearCopy(sessionId: string, grids: readonly Promise<Float32Array | null>[]): Promise<boolean> {
    const { config, store, keyRing } = this.deps;
    this.directions ??= sketchDirections(keyRing.saltedKey(FRAME_DIGEST_PURPOSE, Buffer.from('frame-sketch-directions', 'utf8')));
    const directions = this.directions;
    const bands = await Promise.all(
      grids.map(async (grid) => {
        const g = await grid;
        if (!g) return [];
        return sketchBands(sketch(g, directions)).map((b) => createHmac('sha256', this.bandKey).update(b).digest('hex'));
      }),
    );
    const matches = await store.recordSketches(sessionId, bands, config.liveness.nearReplayWindowSeconds);
    return matches.some((m) => nearCopyFrame(m)) || nearCopySession(matches);
  }

  private async judge(
    session: Pick<StoredSession, 'id' | 'createdAt' | 'expiresAt' | 'steps' | 'lights'>,
    parts: SubmittedFrames,
    timing: { receivedAt: number; capturedAt: readonly number[] | null },
  ): Promise<Verdict> {
    const { config, store, face } = this.deps;
    const { frames, lightFrames } = parts;
    const none = frames.map(() => null);
    const failed = (reason: FailureReason, stepsSeen: (LivenessStep | null)[] = none) => ({ status: 'failed' as const, reason, stepsSeen });
    const { steps, lights } = session;
    if (Date.now() >= session.expiresAt) return failed('session_expired');
    // Every part, pose and light, takes part in the replay check. Identical frames within this call
    // are one picture repeated (static_capture, judged below), not a replay.
    const all = [...frames, ...lightFrames];
    const digestOf = all.map((f) => this.frameDigest(f));
    const recorded = await store.recordFrames([...new Set(digestOf)], config.liveness.replayWindowSeconds);
    // A digest is kept only for a frame that decoded: the ones this call added are forgotten again for
    // frames never decoded (refused before the decode, or not images).
    const added = new Set(recorded.added);
    const forget = (undecoded: readonly number[]) => store.forgetFrames([...new Set(undecoded.map((i) => digestOf[i]!))].filter((d) => added.has(d)));
    const everyPart = all.map((_, i) => i);
    if (recorded.seen) {
      await forget(everyPart);
      return failed('replayed_frames');
    }
    // Before any decode: a session answered faster than a person can follow it costs no face work.
    if (
      !plausibleTiming({
        createdAt: session.createdAt,
        receivedAt: timing.receivedAt,
        steps: steps.length,
        capturedAt: timing.capturedAt,
        minStepMs: config.liveness.minStepMs,
      })
    ) {
      await forget(everyPart);
      return failed('implausible_timing');
    }

    // A light frame is made small (LIGHT_FRAME_MAX_SIDE): the colour measure, the detector and the
    // sketch need no more. One that already is, a JPEG (the console's), is checked by its header and
    // handed to its light job as it came, not decoded here: the face process decodes it and measures
    // it (its face's grid, its colour sample). Any other is normalised and encoded small.
    const maxPixels = config.biometrics.selfieMaxPixels;
    const lightChecked = Promise.allSettled(lightFrames.map((f) => face.lightFrameJpeg(f, { maxPixels, maxSide: LIGHT_FRAME_MAX_SIDE })));
    const poseNormalised = Promise.allSettled(frames.map((f) => face.normalise(f, { maxPixels })));
    const lightDecoded = await lightChecked;
    const deadlineAt = Date.now() + config.queues.faceJobTimeoutMs;
    // Light frames are judged only when there are as many as lights: a wrong count is
    // `light_not_followed` whatever they show, and costs no face work.
    const lightCount = lights && lightFrames.length === lights.length && lightDecoded.every((d) => d.status === 'fulfilled') ? lightFrames.length : 0;
    // The light frames' jobs go first, while this process still normalises the pose frames: they are
    // the session's longest path (every frame's face embedded). In jobs of at most
    // LIVENESS_LIGHT_JOB_FRAMES frames, of even sizes (platform/jobs/light.ts), which the face
    // processes take in parallel: one job kept one face process busy with them while the other had
    // finished its pose frames (docs/performance.md "The light frames shared by the face processes").
    const lightWork =
      lightCount > 0
        ? this.analyseLight(
            lightDecoded.map((d) => (d as PromiseFulfilledResult<Buffer>).value),
            deadlineAt,
          )
        : null;
    lightWork?.catch(() => {}); // awaited below
    const decoded = [...(await poseNormalised), ...lightDecoded];
    const undecodable = everyPart.filter((i) => decoded[i]!.status === 'rejected');
    if (undecodable.length) {
      await forget(undecodable);
      throw (decoded[undecodable[0]!] as PromiseRejectedResult).reason;
    }
    const images = decoded.slice(0, frames.length).map((d) => (d as PromiseFulfilledResult<NormalisedImage>).value);
    const poseImages = images;
    // Pixels decoded here meanwhile: the first frame's (the screen-pattern measure), and every pose
    // frame's with the near-copy check on (its sketch); the light frames' grids come with their jobs.
    const nearReplay = config.liveness.nearReplayWindowSeconds > 0;
    const posePixels = poseImages.map((img, i) => (i === 0 || nearReplay ? decodeRgb(img.jpeg) : null));
    for (const p of posePixels) p?.catch(() => {});
    // Every pose frame at once (each face process takes one), each as a chain: its liveness stage, and
    // its embedding started by the face process as soon as the face is aligned (the identity check
    // compares every pose frame with the best frontal one). A session refused before that check
    // (`static_capture`) has had its frames embedded for nothing: the price of not waiting for every
    // frame's stage before embedding any.
    const chains = await Promise.all(poseImages.map((img) => face.analyseAndEmbed(img, 'single', deadlineAt, true)));
    const lit = lightWork ? await lightWork : null;
    // A light frame its face process could not decode (past a header that was well formed): the call
    // is refused as for any undecodable frame, and only that frame's digest forgotten.
    const undecodedLight = (lit?.frames ?? []).flatMap((f, k) => (!f.ok && f.code === 'invalid_image' ? [frames.length + k] : []));
    if (undecodedLight.length) {
      await forget(undecodedLight);
      throw new AppError('invalid_image', 'The image could not be decoded');
    }
    const poseAnalyses: CaptureAnalysis[] = chains.map((c) => c.analysis);
    // Every face's grid (frame-sketch.ts): the near-copy sketch of each frame, the light frames' continuity.
    const gridOf = async (pixels: Promise<RgbPixels> | null, landmarks5: readonly (readonly [number, number])[] | null) =>
      pixels && landmarks5 ? faceGrid(await pixels, landmarks5) : null;
    const lightGridList = (lit?.frames ?? []).map((f) => (f.ok ? gridFromJob(f.grid) : null));
    const lightGrids = lightGridList.map((g) => Promise.resolve(g));
    const measured: FrameFace[] = poseAnalyses.map((a) =>
      hasFace(a) ? { outcome: 'face', landmarks5: a.face.landmarks5, livenessScore: a.livenessScore } : { outcome: a.outcome },
    );
    const first = poseAnalyses[0]!;
    const pattern = hasFace(first) ? screenPattern(await posePixels[0]!, first.face.landmarks5) : null;
    // Without the light check's verdict first: it needs the best frontal frame this names.
    const passiveSessionThreshold = config.face.livenessSessionThreshold;
    const v = judgeFaces({ frames: measured, steps, screenPattern: pattern, passiveSessionThreshold });
    // Frames sent again with new bytes: one is enough, and it is a replay whatever else they show.
    if (nearReplay) {
      const poseGrids = poseAnalyses.map((a, i) => gridOf(posePixels[i]!, hasFace(a) ? a.face.landmarks5 : null));
      if (await this.nearCopy(session.id, [...poseGrids, ...lightGrids])) return failed('replayed_frames', v.stepsSeen);
    }
    if (v.status === 'failed') return failed(v.reason, v.stepsSeen);
    const faces = poseAnalyses as AnalysedFace[];
    // A frame with a face always has its embedding (the chain embeds whatever the passive score).
    const embedded = chains.map((c) => c.embedding!);
    if (
      !onePerson(
        embedded.map((e) => e.embedding),
        v.reference,
      )
    )
      return failed('different_faces', v.stepsSeen);
    // The light frames, once the best frontal frame (whose person they must show) is known; then the
    // remaining checks again with their verdict, in decision.ts's order.
    let then = v.then;
    if (lights && !(then.status === 'failed' && then.reason === 'challenge_not_followed')) {
      const reference = embedded[v.reference]!.embedding;
      const samples = lit ? this.lightSamples(lit, reference) : [];
      const light = judgeLightResponse(lights, samples);
      const withLight = judgeFaces({ frames: measured, steps, screenPattern: pattern, passiveSessionThreshold, light });
      if (withLight.status === 'needs_identity') then = withLight.then;
    }
    if (then.status === 'failed') return failed(then.reason, v.stepsSeen);
    const best = then.frontal;
    return {
      status: 'passed',
      stepsSeen: v.stepsSeen,
      frontal: {
        embedding: embedded[best]!.embedding,
        engineVersion: embedded[best]!.engineVersion,
        quality: qualitySummary(faces[best]!.quality),
        jpeg: images[best]!.jpeg,
      },
    };
  }

  /**
   * A session's light frames as `light` jobs of at most LIVENESS_LIGHT_JOB_FRAMES frames, of even
   * sizes (8 frames by 4: 4 + 4; 7: 4 + 3; 6: 3 + 3), run in parallel; their frames and embeddings
   * in the frames' order, as one job would answer them.
   */
  private async analyseLight(jpegs: readonly Buffer[], deadlineAt: number): Promise<{ frames: LightFrameResult[]; embeddings: (CaptureEmbedding | null)[] }> {
    const runs = lightJobRuns(jpegs.length, this.deps.config.liveness.lightJobFrames);
    const results = await Promise.all(runs.map(([start, end]) => this.deps.face.analyseLightFrames(jpegs.slice(start, end), true, deadlineAt, true)));
    return { frames: results.flatMap((r) => r.frames), embeddings: results.flatMap((r) => r.embeddings) };
  }

  /**
   * The light frames' colour samples, or nulls when they do not show the session's person throughout:
   * every light frame's face embedding must be the best frontal frame's person (LIGHT_SAME_PERSON_COSINE:
   * another face lit on cue proves nothing about this one), so a face swapped
   * into any one of them refuses them all. A frame without a face (or, where the detector ran, with
   * several clear faces) has no sample and no embedding.
   */
  private lightSamples(lit: { frames: LightFrameResult[]; embeddings: (CaptureEmbedding | null)[] }, reference: readonly number[]): (LightSample | null)[] {
    const none = lit.frames.map(() => null);
    const samePerson = lit.frames.every(
      (f, i) => !f.ok || (lit.embeddings[i] != null && onePerson([reference, lit.embeddings[i]!.embedding], 0, LIGHT_SAME_PERSON_COSINE)),
    );
    if (!samePerson) return none;
    return lit.frames.map((f) => (f.ok ? f.sample : null));
  }

  /**
   * The one use of a passed session by a consumer (verify-face, /verify/self): its best frontal frame;
   * null for a failed, expired, used, foreign, unknown or malformed session (the caller answers
   * `liveness_failed` with `reason: liveness_session_invalid` in its own way).
   */
  async useByConsumer(userId: string, id: string): Promise<FrontalFrame | null> {
    if (!UUID.test(id)) return null;
    return this.deps.store.take(id, ownerOf({ kind: 'consumer', userId, sessionId: '' }));
  }
}

/**
 * A light frame's face grid as its job sent it (platform/jobs/light.ts: 32×32 float32, base64); a
 * grid of any other size is a fault of the path.
 */
function gridFromJob(b64: string): Float32Array {
  const bytes = Buffer.from(b64, 'base64');
  if (bytes.length !== GRID * GRID * 4) throw new Error(`a light job's grid has ${bytes.length} bytes`);
  // Copied into its own buffer: aligned for Float32Array whatever the decoded bytes' offset.
  return new Float32Array(new Uint8Array(bytes).buffer);
}

/** The error verify-face answers for a session that cannot be used. */
export const livenessSessionInvalid = () =>
  new AppError('liveness_failed', 'The liveness session is not a passed session of yours that is still unused and within its lifetime; run a new one', {
    extra: { outcome: 'liveness_failed', reason: 'liveness_session_invalid' },
  });

/** The error verify-face and /verify/self answer for a plain capture under LIVENESS_MODE=challenge. */
export const livenessSessionRequired = () =>
  new AppError('liveness_session_required', 'A passed liveness session (livenessSessionId) is required instead of a single capture', {
    extra: { outcome: 'liveness_session_required' },
  });
