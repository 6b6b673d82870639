/**
 * The fault suite's bounded load, through HTTP only, on 127.0.0.1, as real clients:
 *   - identify clients: an operator's POST /identify with a real photo (every answer 200 must have its
 *     SearchLog row; no answer may list a user whose deletion was answered before it was sent);
 *   - one of them alternates with PATCH /users/{id}/preferences (the last answered change must be stored);
 *   - account clients: the consumer's whole life — OTP sign-in (the code read from the SMS outbox),
 *     NIN validate → verify-face (a selfie) → link, POST /verify/self → PATCH /users/{id} (phone change),
 *     and on every second account /verify/self → DELETE /users/{id}. A step that is refused for want of a
 *     dependency (503, or no answer) is retried from the step that issued its token, as a client would.
 * Every request is a Sample; every answered write is recorded for the read-back (lib/verify.ts).
 *   - an open-loop prober: one /identify every probeIntervalMs, so that requests keep arriving while
 *     the closed loops wait.
 * Bounded: a few closed loops and one open loop, each request at most HANG_MS + 8 s, until stop().
 */
import { readFileSync } from 'node:fs';

export const JOB_TIMEOUT_MS = 10_000;
/** An answer slower than this (or none) is a hang. */
export const HANG_MS = JOB_TIMEOUT_MS + 2_000;

export type Kind = 'identify' | 'preferences' | 'otp-request' | 'otp-verify' | 'validate' | 'verify-face' | 'link' | 'verify-self' | 'phone' | 'delete';

export interface Sample {
  at: number;
  kind: Kind;
  status: number;
  ms: number;
  retryAfter: string | null;
  error?: string;
  referenceId?: string;
  candidates?: string[];
}

export interface AnsweredWrites {
  /** Answered 200 of /identify: its SearchLog row must exist. */
  identify: { referenceId: string; sentAt: number; answeredAt: number; candidates: string[] }[];
  preferences: { userId: string; language: string; doneAt: number }[];
  /** `sentAt`: the account's first link request (an earlier attempt whose answer was lost may have committed). */
  links: { userId: string; nin: string; sentAt: number; doneAt: number }[];
  phones: { userId: string; phone: string; doneAt: number }[];
  deletions: { userId: string; doneAt: number }[];
  /**
   * The first DELETE sent for each account, answered or not: a deletion whose answer was lost (the
   * process or its host went away after the commit) is applied all the same, and the account's retry
   * meets 404. From then on the user may be gone from /identify's answers.
   */
  deletionsSent: { userId: string; sentAt: number }[];
  /** Accounts whose life was cut short (gave up after retries): not a loss, a figure. */
  abandoned: number;
  completed: number;
}

export interface Photo {
  data: Buffer;
  type: string;
  name: string;
}

export interface LoadOptions {
  url: string;
  operatorToken: string;
  /** A consumer for the preferences changes. */
  consumer: { userId: string; token: string };
  outboxFile: string;
  /** The /identify probe, the verify-face selfie and the /verify/self capture: the registry persons' face. */
  probe: Photo;
  linkSelfie: Photo;
  proofSelfie: Photo;
  /** NINs enrolled in the registry simulator, one per account (with the selfies' face). */
  nextNin: () => string | undefined;
  identifyClients: number;
  accountClients: number;
  /**
   * An open-loop prober: one /identify every this many ms whatever the others wait for (0: none), so
   * that requests keep ARRIVING while a dependency is away — the closed loops are all held by requests
   * sent just before. At most HANG_MS / interval in flight.
   */
  probeIntervalMs: number;
  /** 4 digits making this run's phone numbers unique (at most 1,000 accounts a run). */
  phonePrefix: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const LANGUAGES = ['en', 'ha', 'ig', 'yo', 'pcm'];

interface Answer {
  status: number;
  body: Record<string, unknown>;
  retryAfter: string | null;
}

export class Load {
  readonly samples: Sample[] = [];
  readonly writes: AnsweredWrites = { identify: [], preferences: [], links: [], phones: [], deletions: [], deletionsSent: [], abandoned: 0, completed: 0 };
  private running = false;
  /** Send times of the requests awaiting their answer. */
  private readonly pending = new Map<number, number>();
  private nextId = 0;
  private loops: Promise<void>[] = [];
  private accountSeq = 0;
  private prefSeq = 0;

  constructor(private readonly o: LoadOptions) {}

  start(): void {
    this.running = true;
    for (let i = 0; i < this.o.identifyClients; i++) this.loops.push(this.identifyLoop(i === 0));
    for (let i = 0; i < this.o.accountClients; i++) this.loops.push(this.accountLoop());
    if (this.o.probeIntervalMs > 0) this.loops.push(this.probeLoop());
  }

  private async probeLoop(): Promise<void> {
    const inFlight = new Set<Promise<number>>();
    while (this.running) {
      const p = this.identifyOnce();
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
      await sleep(this.o.probeIntervalMs);
    }
    await Promise.all(inFlight);
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    this.loops = [];
  }

  get isRunning(): boolean {
    return this.running;
  }

  /** One request, recorded; status 0 when there was no answer (reset, refused, or no answer in time). */
  async send(kind: Kind, method: string, path: string, opts: { token?: string; json?: unknown; form?: Record<string, string | Photo> } = {}): Promise<Answer> {
    const headers: Record<string, string> = {};
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    let body: RequestInit['body'];
    if (opts.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(opts.json);
    } else if (opts.form) {
      const fd = new FormData();
      for (const [k, v] of Object.entries(opts.form)) {
        if (typeof v === 'string') fd.append(k, v);
        else fd.append(k, new Blob([new Uint8Array(v.data)], { type: v.type }), v.name);
      }
      body = fd;
    }
    const at = Date.now();
    const id = this.nextId++;
    this.pending.set(id, at);
    try {
      const res = await fetch(`${this.o.url}${path}`, { method, headers, body, signal: AbortSignal.timeout(HANG_MS + 8000) });
      const text = await res.text();
      let parsed: Record<string, unknown> = {};
      try {
        parsed = JSON.parse(text) as Record<string, unknown>;
      } catch {
        // not JSON: counted by its status
      }
      const retryAfter = res.headers.get('retry-after');
      const sample: Sample = { at, kind, status: res.status, ms: Date.now() - at, retryAfter };
      if (res.status >= 400 && typeof parsed.error === 'string') sample.error = parsed.error;
      if (kind === 'identify' && res.status === 200) {
        sample.referenceId = parsed.referenceId as string | undefined;
        sample.candidates = ((parsed.candidates as { userId: string }[] | undefined) ?? []).map((c) => c.userId);
      }
      this.samples.push(sample);
      return { status: res.status, body: parsed, retryAfter };
    } catch (e) {
      // fetch's TypeError says little; its cause (a reset, a closed socket) says what the client met.
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      const error = cause ? `${(e as Error).name}: ${cause.code ?? cause.message ?? ''}` : (e as Error).name;
      this.samples.push({ at, kind, status: 0, ms: Date.now() - at, retryAfter: null, error });
      return { status: 0, body: {}, retryAfter: null };
    } finally {
      this.pending.delete(id);
    }
  }

  /** Whether a request sent before `t` still awaits its answer. */
  awaitingAnswerSentBefore(t: number): boolean {
    for (const at of this.pending.values()) if (at < t) return true;
    return false;
  }

  /** One more /identify (its answer is checked like the others'); its status (0: no answer). */
  async identifyOnce(): Promise<number> {
    const sentAt = Date.now();
    const a = await this.send('identify', 'POST', '/identify', { token: this.o.operatorToken, form: { attestation: 'true', file: this.o.probe } });
    if (a.status === 200) {
      const candidates = ((a.body.candidates as { userId: string }[] | undefined) ?? []).map((c) => c.userId);
      this.writes.identify.push({ referenceId: a.body.referenceId as string, sentAt, answeredAt: Date.now(), candidates });
    }
    return a.status;
  }

  /** What a client does after a refusal: waits (at most a second here, to measure recovery closely). */
  private async backoff(a: Answer): Promise<void> {
    const hinted = a.retryAfter ? Number(a.retryAfter) * 1000 : 500;
    await sleep(Math.min(Number.isFinite(hinted) ? hinted : 500, 1000));
  }

  /** A refused step: back off, and say so (the caller retries). */
  private async refused(a: Answer): Promise<false> {
    await this.backoff(a);
    return false;
  }

  private async identifyLoop(withPreferences: boolean): Promise<void> {
    const { consumer } = this.o;
    while (this.running) {
      if (withPreferences && this.prefSeq++ % 2 === 0) {
        const language = LANGUAGES[this.prefSeq % LANGUAGES.length]!;
        const a = await this.send('preferences', 'PATCH', `/users/${consumer.userId}/preferences`, { token: consumer.token, json: { language } });
        if (a.status === 200) this.writes.preferences.push({ userId: consumer.userId, language, doneAt: Date.now() });
        else if (a.status === 0 || a.status === 503) await this.backoff(a);
        continue;
      }
      const status = await this.identifyOnce();
      if (status === 0) await sleep(200);
      // A client honours Retry-After (here at most a second); the open-loop prober keeps requests arriving.
      else if (status === 503) await sleep(1000);
    }
  }

  /** Retries `attempt` until it says done (true) or the account's time is up (false). */
  private async retry(deadline: number, attempt: () => Promise<boolean>): Promise<boolean> {
    while (this.running && Date.now() < deadline) {
      if (await attempt()) return true;
    }
    return false;
  }

  private codeFor(phone: string): string | undefined {
    try {
      const lines = readFileSync(this.o.outboxFile, 'utf8').trim().split('\n');
      for (let i = lines.length - 1; i >= 0; i--) {
        const l = JSON.parse(lines[i]!) as { to: string; code: string };
        if (l.to === phone) return l.code;
      }
    } catch {
      // no outbox yet
    }
    return undefined;
  }

  private async accountLoop(): Promise<void> {
    while (this.running) {
      const nin = this.o.nextNin();
      if (!nin) {
        await sleep(500);
        continue;
      }
      const n = this.accountSeq++;
      const ok = await this.account(n, nin);
      if (ok) this.writes.completed++;
      else if (this.running) this.writes.abandoned++;
    }
  }

  /** One account's life; false when a step gave up (the load keeps going with the next account). */
  private async account(n: number, nin: string): Promise<boolean> {
    const digits = `${this.o.phonePrefix}${String(n).padStart(3, '0')}`;
    const phone = `+234803${digits}`;
    const newPhone = `+234806${digits}`;
    const deadline = Date.now() + 90_000;
    let token = '';
    let userId = '';

    // Sign in: request a code, read it from the SMS outbox, verify it.
    if (
      !(await this.retry(deadline, async () => {
        const r = await this.send('otp-request', 'POST', '/auth/otp/request', { json: { phone } });
        if (r.status !== 200) return this.refused(r);
        const code = this.codeFor(phone);
        if (!code) return this.refused(r);
        const v = await this.send('otp-verify', 'POST', '/auth/otp/verify', { json: { phone, code } });
        if (v.status !== 200) return this.refused(v);
        token = v.body.accessToken as string;
        userId = v.body.userId as string;
        return true;
      }))
    )
      return false;

    // Link the NIN: validate → verify-face → link. A retry after a link that was applied but not
    // answered meets 409 on validate ("already linked to your account"): done, not counted as answered.
    let tried = false;
    let linkSentAt: number | undefined;
    if (
      !(await this.retry(deadline, async () => {
        const v = await this.send('validate', 'POST', '/identity/nin/validate', { token, json: { nin } });
        if (v.status === 409 && tried) return true;
        tried = true;
        if (v.status !== 200 || typeof v.body.validationToken !== 'string') return this.refused(v);
        const f = await this.send('verify-face', 'POST', '/identity/nin/verify-face', {
          token,
          form: { validationToken: v.body.validationToken, file: this.o.linkSelfie },
        });
        if (f.status !== 200 || typeof f.body.linkToken !== 'string') return this.refused(f);
        linkSentAt ??= Date.now();
        const l = await this.send('link', 'POST', '/identity/nin/link', { token, json: { linkToken: f.body.linkToken } });
        if (l.status !== 200) return this.refused(l);
        this.writes.links.push({ userId, nin, sentAt: linkSentAt, doneAt: Date.now() });
        return true;
      }))
    )
      return false;

    // A phone change, proved by a fresh /verify/self.
    if (
      !(await this.retry(deadline, async () => {
        const s = await this.send('verify-self', 'POST', '/verify/self', { token, form: { image: this.o.proofSelfie } });
        if (s.status !== 200 || typeof s.body.proofToken !== 'string') return this.refused(s);
        const p = await this.send('phone', 'PATCH', `/users/${userId}`, { token, json: { proofToken: s.body.proofToken, phone: newPhone } });
        if (p.status !== 200) return this.refused(p);
        this.writes.phones.push({ userId, phone: newPhone, doneAt: Date.now() });
        return true;
      }))
    )
      return false;

    // Every second account is deleted (the others stay, so that /identify has live users to find).
    if (n % 2 === 1) {
      let sent = false;
      return this.retry(deadline, async () => {
        const s = await this.send('verify-self', 'POST', '/verify/self', { token, form: { image: this.o.proofSelfie } });
        if (s.status === 404 && sent) return true; // deleted by an attempt whose answer was lost
        if (s.status !== 200 || typeof s.body.proofToken !== 'string') return this.refused(s);
        if (!sent) this.writes.deletionsSent.push({ userId, sentAt: Date.now() });
        sent = true;
        const d = await this.send('delete', 'DELETE', `/users/${userId}`, { token, json: { proofToken: s.body.proofToken } });
        if (d.status !== 200) return this.refused(d);
        this.writes.deletions.push({ userId, doneAt: Date.now() });
        return true;
      });
    }
    return true;
  }
}
