/**
 * Liveness sessions (SPEC 13.1): a server-random challenge over several frames, judged by the server
 * from the frames alone (features/liveness/decision.ts), and lent once to verify-face or /verify/self.
 *
 * A frames call, in this order (each reason answers at once; nothing after it runs):
 * 1. the session is found and the caller's (404), not already given frames (409: the call claims it,
 *    atomically, before anything else happens, so a second call never runs), within its lifetime
 *    (`session_expired`);
 * 2. the keyed digests of the frames' bytes against every frame received before (`replayed_frames`),
 *    before any frame is decoded; every digest is remembered whatever the outcome; then the timing,
 *    also before any decode (`implausible_timing`: decision.ts `plausibleTiming`);
 * 3. each frame normalised (SELFIE_MAX_PIXELS) and sent through the face path's liveness stage, all
 *    frames at once (each face process takes one): detection, landmarks, the passive score; each
 *    frame's embedding started by the face process as soon as its face is aligned (one chain);
 * 4. the checks that need no embedding (`no_face`, `multiple_faces`; then, only with
 *    LIVENESS_NEAR_REPLAY_WINDOW_SECONDS above 0, every frame a near copy of one earlier session's
 *    frames: `replayed_frames`, frame-sketch.ts; then `static_capture`), then every frame compared
 *    with the best frontal one (`different_faces`), then `challenge_not_followed` and `spoof_suspected`;
 * 5. a passed session keeps its best frontal frame (embedding, quality, JPEG; sealed) for its one use.
 *
 * A session claimed and then stopped by an invalid image (400) or by the face path (503) is spent
 * (failed, no reason): its frames' digests are remembered, so the client starts a new session with
 * new frames. A consumer's failed session counts as one failed biometric attempt (SPEC 12.1).
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
import { hasFace, type AnalysedFace, type BiometricAttemptsService, type CaptureAnalysis, type FaceService } from '../face/index.js';
import { drawSteps, judgeFaces, onePerson, plausibleTiming, type FailureReason, type FrameFace, type LivenessStep } from './decision.js';
import { faceGrid, nearCopyOfOneSession, sketch, sketchBands, sketchDirections } from './frame-sketch.js';
import { screenPattern } from './screen-pattern.js';
import type { FrontalFrame, LivenessSessionStore, StoredSession } from './session-store.js';

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
  session: { id: string; steps: LivenessStep[]; expiresAt: string; minFrames: number; maxFrames: number };
}

export interface JudgedSession {
  session: { id: string; status: 'passed' | 'failed'; reason?: FailureReason; stepsSeen: (LivenessStep | null)[] };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The key ring's purpose the frame digests are computed under (platform/keys/README.md). */
const FRAME_DIGEST_PURPOSE = 'liveness-frame-digests';

export const ownerOf = (p: Principal): string => (p.kind === 'consumer' ? `consumer:${p.userId}` : `operator:${p.operatorId}`);

const notFound = () => new AppError('not_found', 'No such liveness session');

export class LivenessService {
  private readonly digestKey: Buffer;
  private readonly bandKey: Buffer;
  /** The sketch's keyed directions (frame-sketch.ts), drawn on first use: only with the near-copy check on. */
  private directions: Int8Array | null = null;

  constructor(private readonly deps: LivenessDeps) {
    this.digestKey = deps.keyRing.saltedKey(FRAME_DIGEST_PURPOSE, Buffer.from('frames', 'utf8'));
    this.bandKey = deps.keyRing.saltedKey(FRAME_DIGEST_PURPOSE, Buffer.from('frame-sketch-bands', 'utf8'));
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
    const ttl = config.liveness.sessionTtlSeconds;
    const createdAt = Date.now();
    const expiresAt = createdAt + ttl * 1000;
    // Kept a lifetime longer than it lives: a late frames call is told `session_expired`, not 404.
    await store.create({ id, owner, steps, createdAt, expiresAt }, 2 * ttl);
    metrics.outcome('liveness_session', 'created');
    return {
      session: { id, steps, expiresAt: new Date(expiresAt).toISOString(), minFrames: config.liveness.minFrames, maxFrames: config.liveness.maxFrames },
    };
  }

  /** POST /liveness/sessions/{id}/frames: the frames in capture order (the route checked their count). */
  async submitFrames(
    principal: Principal,
    id: string,
    frames: Buffer[],
    /** When the frames arrived (the server's clock) and the client's claimed capture times, if sent. */
    timing: { receivedAt: number; capturedAt: readonly number[] | null },
  ): Promise<JudgedSession> {
    const { store, biometric } = this.deps;
    if (!UUID.test(id)) throw notFound();
    const session = await store.get(id);
    if (!session || session.owner !== ownerOf(principal)) throw notFound();
    if (principal.kind === 'consumer') await biometric.assertNotLocked(principal.userId, 'liveness_session');
    if (!(await store.claim(id))) throw new AppError('conflict', 'This liveness session has already been given its frames');
    let verdict:
      | { status: 'passed'; stepsSeen: (LivenessStep | null)[]; frontal: FrontalFrame }
      | { status: 'failed'; reason: FailureReason; stepsSeen: (LivenessStep | null)[] };
    try {
      verdict = await this.judge(session, frames, timing);
    } catch (e) {
      await store
        .fail(
          id,
          null,
          frames.map(() => null),
        )
        .catch(() => {});
      throw e;
    }
    if (verdict.status === 'passed') await store.pass(id, verdict.stepsSeen, verdict.frontal);
    else await store.fail(id, verdict.reason, verdict.stepsSeen);
    this.deps.metrics.outcome('liveness_session', verdict.status === 'passed' ? 'passed' : verdict.reason);
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
   * sketch (frame-sketch.ts) and answers whether every frame is a near copy of a frame of one and the
   * same earlier session (the same pixels sent again with new bytes). False when a frame has no face.
   */
  private async nearCopy(sessionId: string, analyses: readonly CaptureAnalysis[], pixels: readonly Promise<RgbPixels>[]): Promise<boolean> {
    const { config, store, keyRing } = this.deps;
    this.directions ??= sketchDirections(keyRing.saltedKey(FRAME_DIGEST_PURPOSE, Buffer.from('frame-sketch-directions', 'utf8')));
    const directions = this.directions;
    const bands = await Promise.all(
      analyses.map(async (a, i) => {
        if (!hasFace(a)) return [];
        const s = sketch(faceGrid(await pixels[i]!, a.face.landmarks5), directions);
        return sketchBands(s).map((b) => createHmac('sha256', this.bandKey).update(b).digest('hex'));
      }),
    );
    const matches = await store.recordSketches(sessionId, bands, config.liveness.nearReplayWindowSeconds);
    return analyses.every(hasFace) && nearCopyOfOneSession(matches);
  }

  private async judge(
    session: Pick<StoredSession, 'id' | 'createdAt' | 'expiresAt' | 'steps'>,
    frames: Buffer[],
    timing: { receivedAt: number; capturedAt: readonly number[] | null },
  ): Promise<
    | { status: 'passed'; stepsSeen: (LivenessStep | null)[]; frontal: FrontalFrame }
    | { status: 'failed'; reason: FailureReason; stepsSeen: (LivenessStep | null)[] }
  > {
    const { config, store, face } = this.deps;
    const none = frames.map(() => null);
    const failed = (reason: FailureReason, stepsSeen: (LivenessStep | null)[] = none) => ({ status: 'failed' as const, reason, stepsSeen });
    const { steps } = session;
    if (Date.now() >= session.expiresAt) return failed('session_expired');
    // Identical frames within this call are one picture repeated (static_capture, judged below), not a replay.
    const digests = [...new Set(frames.map((f) => this.frameDigest(f)))];
    if (await store.recordFrames(digests, config.liveness.replayWindowSeconds)) return failed('replayed_frames');
    // Before any decode: a session answered faster than a person can follow it costs no face work.
    if (
      !plausibleTiming({
        createdAt: session.createdAt,
        receivedAt: timing.receivedAt,
        steps: steps.length,
        capturedAt: timing.capturedAt,
        minStepMs: config.liveness.minStepMs,
      })
    )
      return failed('implausible_timing');

    const images: NormalisedImage[] = await Promise.all(frames.map((f) => face.normalise(f, { maxPixels: config.biometrics.selfieMaxPixels })));
    const deadlineAt = Date.now() + config.queues.faceJobTimeoutMs;
    // Every frame at once (each face process takes one), each as a chain: its liveness stage, and
    // its embedding started by the face process as soon as the face is aligned (the identity check
    // compares every frame: one person in every frame). A session refused before that check
    // (`static_capture`) has had its frames embedded for nothing: the price of not waiting for every
    // frame's stage before embedding any.
    // The first frame's pixels, decoded here meanwhile, for the screen-pattern measure.
    const firstPixels = decodeRgb(images[0]!.jpeg);
    firstPixels.catch(() => {});
    // With the near-copy check on, every frame's pixels (its face's sketch), decoded meanwhile too.
    const nearReplay = config.liveness.nearReplayWindowSeconds > 0;
    const pixels = nearReplay ? images.map((img, i) => (i === 0 ? firstPixels : decodeRgb(img.jpeg))) : [];
    for (const p of pixels) p.catch(() => {});
    const chains = await Promise.all(images.map((img) => face.analyseAndEmbed(img, 'single', deadlineAt)));
    const analyses: CaptureAnalysis[] = chains.map((c) => c.analysis);
    const measured: FrameFace[] = analyses.map((a) =>
      hasFace(a) ? { outcome: 'face', landmarks5: a.face.landmarks5, livenessScore: a.livenessScore } : { outcome: a.outcome },
    );
    const first = analyses[0]!;
    const pattern = hasFace(first) ? screenPattern(await firstPixels, first.face.landmarks5) : null;
    const v = judgeFaces({ frames: measured, steps, livenessThreshold: config.face.livenessThreshold, screenPattern: pattern });
    const copied = nearReplay ? await this.nearCopy(session.id, analyses, pixels) : false;
    if (v.status === 'failed' && v.reason !== 'static_capture') return failed(v.reason, v.stepsSeen);
    // Frames sent again with new bytes: after the face counts (it needs every face), before the rest.
    if (copied) return failed('replayed_frames', v.stepsSeen);
    if (v.status === 'failed') return failed(v.reason, v.stepsSeen);
    const faces = analyses as AnalysedFace[];
    // A frame with a face always has its embedding (the chain embeds whatever the passive score).
    const embedded = chains.map((c) => c.embedding!);
    if (
      !onePerson(
        embedded.map((e) => e.embedding),
        v.reference,
      )
    )
      return failed('different_faces', v.stepsSeen);
    if (v.then.status === 'failed') return failed(v.then.reason, v.stepsSeen);
    const best = v.then.frontal;
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
   * The one use of a passed session by a consumer (verify-face, /verify/self): its best frontal frame;
   * null for a failed, expired, used, foreign, unknown or malformed session (the caller answers
   * `liveness_failed` with `reason: liveness_session_invalid` in its own way).
   */
  async useByConsumer(userId: string, id: string): Promise<FrontalFrame | null> {
    if (!UUID.test(id)) return null;
    return this.deps.store.take(id, ownerOf({ kind: 'consumer', userId, sessionId: '' }));
  }
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
