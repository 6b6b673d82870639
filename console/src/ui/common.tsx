/** Small pieces shared by the consoles: the camera capture, an error note, paging. */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { ComponentChildren } from 'preact';
import type { paths } from '../api/schema.js';

/**
 * A capture-quality issue code, from the generated client (the API's fixed list, platform/face/quality.ts):
 * the advice tables below are `Record<QualityIssue, …>`, so a new code fails the typecheck until it has words.
 */
export type QualityIssue = NonNullable<paths['/identify']['post']['responses'][200]['content']['application/json']['quality']>['issues'][number];

export interface CaptureTexts {
  start: string;
  take: string;
  retake: string;
  upload: string;
  noCamera: string;
  guide: string;
  preview: string;
}

/**
 * A live selfie: getUserMedia with a face guide, take, retake, and a file upload when there is no
 * camera. The captured JPEG is handed to `onChange` and to nobody else; the parent sends it and drops
 * it (`key` change remounts this component, revoking the preview URL and stopping the camera).
 */
export function Capture(props: { texts: CaptureTexts; onChange: (image: Blob | null) => void; id: string }) {
  const video = useRef<HTMLVideoElement>(null);
  const [stream, setStream] = useState<MediaStream | null>(null);
  const [preview, setPreview] = useState<string | null>(null);
  const [cameraError, setCameraError] = useState(false);

  const stop = (s: MediaStream | null) => s?.getTracks().forEach((t) => t.stop());
  useEffect(() => () => stop(stream), [stream]);
  useEffect(
    () => () => {
      if (preview) URL.revokeObjectURL(preview);
    },
    [preview],
  );
  useEffect(() => {
    if (video.current && stream) video.current.srcObject = stream;
  }, [stream, preview]);

  const start = async () => {
    setCameraError(false);
    try {
      if (!navigator.mediaDevices?.getUserMedia) throw new Error('no camera API');
      const s = await navigator.mediaDevices.getUserMedia({ video: { facingMode: 'user', width: { ideal: 640 } }, audio: false });
      setStream(s);
      setPreview(null);
      props.onChange(null);
    } catch {
      setCameraError(true);
    }
  };

  const take = async () => {
    const v = video.current;
    if (!v || !v.videoWidth) return;
    const canvas = document.createElement('canvas');
    canvas.width = v.videoWidth;
    canvas.height = v.videoHeight;
    canvas.getContext('2d')!.drawImage(v, 0, 0);
    const blob = await new Promise<Blob | null>((resolve) => canvas.toBlob(resolve, 'image/jpeg', 0.92));
    canvas.width = canvas.height = 0; // drop the pixels
    if (!blob) return;
    stop(stream);
    setStream(null);
    setPreview(URL.createObjectURL(blob));
    props.onChange(blob);
  };

  const upload = (e: Event) => {
    const input = e.currentTarget as HTMLInputElement;
    const file = input.files?.[0];
    input.value = '';
    if (!file) return;
    stop(stream);
    setStream(null);
    setPreview(URL.createObjectURL(file));
    props.onChange(file);
  };

  return (
    <div class="capture" data-testid={`capture-${props.id}`}>
      <div class="capture-frame">
        {stream && !preview && (
          <>
            <video ref={video} autoplay playsInline muted aria-label={props.texts.guide}>
              <track kind="captions" />
            </video>
            <div class="face-guide" aria-hidden="true" />
          </>
        )}
        {preview && <img src={preview} alt={props.texts.preview} />}
        {!stream && !preview && <p class="capture-hint">{props.texts.guide}</p>}
      </div>
      {cameraError && (
        <p class="note warn" role="alert">
          {props.texts.noCamera}
        </p>
      )}
      <div class="capture-actions">
        {!stream && !preview && (
          <button type="button" onClick={() => void start()}>
            {props.texts.start}
          </button>
        )}
        {stream && !preview && (
          <button type="button" onClick={() => void take()}>
            {props.texts.take}
          </button>
        )}
        {preview && (
          <button type="button" class="secondary" onClick={() => void start()}>
            {props.texts.retake}
          </button>
        )}
        <label class="upload">
          {props.texts.upload}
          <input type="file" accept="image/jpeg,image/png,image/webp" onChange={upload} />
        </label>
      </div>
    </div>
  );
}

export function Note(props: { kind?: 'ok' | 'warn' | 'info'; children: ComponentChildren; testid?: string }) {
  return (
    <p class={`note ${props.kind ?? 'info'}`} role={props.kind === 'warn' ? 'alert' : 'status'} data-testid={props.testid}>
      {props.children}
    </p>
  );
}

/**
 * The advisory capture-quality issues of a face answer as one line of advice each, in the order the API
 * reports them. Nothing when there is no issue (or no quality: no face found). Unknown codes (a code added
 * to the API after this build) are skipped: the advice is optional, the outcome is shown elsewhere.
 */
export function QualityAdvice(props: { issues: readonly string[] | null | undefined; advice: Record<QualityIssue, string>; heading: string; testid?: string }) {
  const lines = (props.issues ?? []).filter((c): c is QualityIssue => Object.hasOwn(props.advice, c)).map((c) => ({ code: c, text: props.advice[c] }));
  if (!lines.length) return null;
  return (
    <div class="note info quality-advice" role="status" data-testid={props.testid ?? 'quality-advice'}>
      <strong>{props.heading}</strong>
      <ul>
        {lines.map((l) => (
          <li key={l.code} data-issue={l.code}>
            {l.text}
          </li>
        ))}
      </ul>
    </div>
  );
}

export function Pager(props: {
  page: number;
  pageSize: number;
  total: number;
  onPage: (p: number) => void;
  labels: { prev: string; next: string; of: (a: number, b: number) => string };
}) {
  const pages = Math.max(1, Math.ceil(props.total / props.pageSize));
  return (
    <nav class="pager" aria-label="pages">
      <button type="button" class="secondary outline" disabled={props.page <= 1} onClick={() => props.onPage(props.page - 1)}>
        {props.labels.prev}
      </button>
      <span>{props.labels.of(props.page, pages)}</span>
      <button type="button" class="secondary outline" disabled={props.page >= pages} onClick={() => props.onPage(props.page + 1)}>
        {props.labels.next}
      </button>
    </nav>
  );
}

export const fmtDate = (iso: string | null | undefined, locale = 'en-GB') =>
  iso ? new Date(iso).toLocaleString(locale, { dateStyle: 'medium', timeStyle: 'short' }) : '—';
export const fmtScore = (n: number | null | undefined) => (typeof n === 'number' ? n.toFixed(3) : '—');

/** Hands a downloaded blob to the browser as a file named `filename` (the object URL is revoked once the download has started). */
export function saveFile(blob: Blob, filename: string) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
