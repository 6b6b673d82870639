/**
 * The liveness challenge (SPEC 13.1, 14.1) as the consumer sees it: the server draws the steps and
 * the screen-light sequence (POST /liveness/sessions); each step is shown with an arrow and a short
 * line, and the camera takes a frame once the person has had time to reach the pose (STEP_MS); then,
 * the person back at the centre, the screen shows each of the session's colours over most of its area
 * for `lightHoldMs` and the camera takes a frame under each (the light the screen throws on the face
 * is what proves the frames are taken now, in front of this screen). The frames go to the server in
 * capture order, which alone decides. A passed session is handed to the caller (verify-face,
 * /verify/self use it instead of a photo); a failed one says plainly what to do next.
 *
 * The preview is mirrored (as a mirror is), so the arrow for `turn_left` points to the screen's left:
 * the way the person sees their own head go. The frames themselves are not mirrored.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { ApiError, createApiClient } from '../api/client.js';
import type { MessageKey, Translate } from '../i18n/index.js';
import { Note } from '../ui/common.js';
import { STEP_MS } from './liveness-timing.js';

type Api = ReturnType<typeof createApiClient>;
type Step = 'center' | 'turn_left' | 'turn_right' | 'look_up';

const ARROW: Record<Step, string> = { center: '●', turn_left: '←', turn_right: '→', look_up: '↑' };

/**
 * The long side of a light frame, in pixels: the face in it is still larger than the 112 px the
 * embedding model sees at a selfie's framing (test/liveness.test.ts checks the fixtures at this size).
 */
const LIGHT_FRAME_MAX_SIDE = 480;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function LivenessCheck(props: {
  t: Translate;
  api: Api;
  id: string;
  onPassed: (sessionId: string) => void;
  /** Told when a check starts (camera on, then sending) and when it ends, passed or failed. */
  onBusy?: (busy: boolean) => void;
}) {
  const { t, api } = props;
  const video = useRef<HTMLVideoElement>(null);
  const [stream, setStream] = useState<MediaStream | null>(null);
  const [steps, setSteps] = useState<Step[] | null>(null);
  const [current, setCurrent] = useState(-1);
  const [phase, setPhase] = useState<'idle' | 'running' | 'lights' | 'sending' | 'passed' | 'failed'>('idle');
  /** The colour the screen shows during the light sequence. */
  const [light, setLight] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);

  const { onBusy } = props;
  useEffect(() => onBusy?.(phase === 'running' || phase === 'lights' || phase === 'sending'), [phase, onBusy]);
  const stop = (s: MediaStream | null) => s?.getTracks().forEach((tr) => tr.stop());
  useEffect(() => () => stop(stream), [stream]);
  useEffect(() => {
    if (video.current && stream) video.current.srcObject = stream;
  }, [stream, current]);

  /**
   * One frame from the camera as a JPEG; `maxSide` bounds its long side (a light frame: its colour and
   * its face's identity need no resolution, and a small frame costs the server less to decode and search).
   */
  const grab = async (maxSide = Infinity): Promise<Blob | null> => {
    const v = video.current;
    if (!v || !v.videoWidth) return null;
    const canvas = document.createElement('canvas');
    const scale = Math.min(1, maxSide / Math.max(v.videoWidth, v.videoHeight));
    canvas.width = Math.round(v.videoWidth * scale);
    canvas.height = Math.round(v.videoHeight * scale);
    canvas.getContext('2d')!.drawImage(v, 0, 0, canvas.width, canvas.height);
    const blob = await new Promise<Blob | null>((resolve) => canvas.toBlob(resolve, 'image/jpeg', 0.92));
    canvas.width = canvas.height = 0;
    return blob;
  };

  const fail = (text: string) => {
    setPhase('failed');
    setFailure(text);
  };

  const run = async () => {
    setFailure(null);
    setPhase('running');
    const { data: created, error } = await api.POST('/liveness/sessions', { body: {} });
    if (!created) return fail((error as ApiError | undefined)?.error === 'rate_limited' ? t('outcome_rate_limited') : t('liveFail_generic'));
    const { id, steps: drawn, minFrames, lights, lightHoldMs } = created.session;
    let s: MediaStream;
    try {
      s = await navigator.mediaDevices.getUserMedia({ video: { facingMode: 'user', width: { ideal: 640 } }, audio: false });
    } catch {
      return fail(t('captureNoCamera'));
    }
    setStream(s);
    // A frame per step, then back to centre until there are enough frames.
    const plan: Step[] = [...(drawn as Step[])];
    while (plan.length < minFrames) plan.push('center');
    setSteps(plan);
    const frames: Blob[] = [];
    // When each frame was taken (this device's clock): the server checks these claims against the
    // times it saw itself.
    const capturedAt: number[] = [];
    for (let i = 0; i < plan.length; i++) {
      setCurrent(i);
      await sleep(STEP_MS);
      capturedAt.push(Date.now());
      const f = await grab();
      if (!f) {
        stop(s);
        setStream(null);
        return fail(t('captureNoCamera'));
      }
      frames.push(f);
    }
    // The light sequence, at the centre pose: each colour over most of the screen, a frame under it
    // once the camera's exposure has settled (lightHoldMs).
    const lightFrames: Blob[] = [];
    if (lights?.length) {
      setCurrent(-1);
      setPhase('lights');
      for (const colour of lights) {
        setLight(colour);
        await sleep(lightHoldMs ?? 450);
        const f = await grab(LIGHT_FRAME_MAX_SIDE);
        if (!f) {
          stop(s);
          setStream(null);
          setLight(null);
          return fail(t('captureNoCamera'));
        }
        lightFrames.push(f);
      }
      setLight(null);
    }
    stop(s);
    setStream(null);
    setCurrent(-1);
    setPhase('sending');
    const form = new FormData();
    frames.forEach((f, i) => form.append('frames', f, `frame${i + 1}.jpg`));
    lightFrames.forEach((f, i) => form.append('lightFrames', f, `light${i + 1}.jpg`));
    form.append('capturedAt', JSON.stringify(capturedAt));
    const { data, error: err } = await api.POST('/liveness/sessions/{id}/frames', {
      params: { path: { id } },
      body: {} as never,
      bodySerializer: () => form,
    });
    if (!data)
      return fail(
        ['biometric_locked', 'rate_limited'].includes((err as ApiError | undefined)?.error ?? '') ? t('outcome_rate_limited') : t('liveFail_generic'),
      );
    if (data.session.status === 'passed') {
      setPhase('passed');
      props.onPassed(id);
      return;
    }
    const key = `liveFail_${data.session.reason ?? 'generic'}` as MessageKey;
    const text = t(key);
    fail(text === key ? t('liveFail_generic') : text);
  };

  const step = steps && current >= 0 ? steps[current]! : null;
  return (
    <div class="liveness" data-testid={`liveness-${props.id}`}>
      <p>{t('liveIntro')}</p>
      {(phase === 'idle' || phase === 'failed') && <p data-testid="liveness-light-hint">{t('liveLightsHint')}</p>}
      {(phase === 'running' || phase === 'lights') && (
        <div class="capture-frame">
          <video ref={video} autoplay playsInline muted aria-label={step ? t(`step_${step}`) : t('captureGuide')}>
            <track kind="captions" />
          </video>
          <div class="face-guide" aria-hidden="true" />
        </div>
      )}
      {phase === 'running' && step && (
        <p class="liveness-step" role="status" aria-live="assertive" data-testid="liveness-step" data-step={step}>
          <span class="liveness-arrow" aria-hidden="true">
            {ARROW[step]}
          </span>{' '}
          <span>{t('liveStep', { n: current + 1, total: steps!.length })}</span>: <strong>{t(`step_${step}`)}</strong>
        </p>
      )}
      {phase === 'lights' && light && (
        <div class="liveness-light" style={{ background: light }} data-testid="liveness-light" data-colour={light}>
          <p role="status" aria-live="polite">
            {t('liveLights')}
          </p>
        </div>
      )}
      {phase === 'sending' && (
        <p role="status" aria-busy="true">
          {t('liveSending')}
        </p>
      )}
      {phase === 'passed' && (
        <Note kind="ok" testid="liveness-passed">
          {t('livePassed')}
        </Note>
      )}
      {phase === 'failed' && failure && (
        <Note kind="warn" testid="liveness-failed">
          {failure}
        </Note>
      )}
      {(phase === 'idle' || phase === 'failed') && (
        <button type="button" onClick={() => void run()}>
          {phase === 'failed' ? t('liveRetry') : t('liveStart')}
        </button>
      )}
    </div>
  );
}
