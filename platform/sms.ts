/**
 * SMS delivery of one-time codes, behind one small interface:
 * - `outbox` (development and tests; refused in production by platform/config.ts) appends one JSON line
 *   `{ "to", "code", "sentAt" }` per message to SMS_OUTBOX_FILE;
 * - `webhook` POSTs `{ to, message, code, sentAt }` as JSON to SMS_WEBHOOK_URL (optionally with
 *   `Authorization: Bearer SMS_WEBHOOK_TOKEN`), bounded by SMS_WEBHOOK_TIMEOUT_MS; any non-2xx answer
 *   or a timeout is a delivery failure.
 * The code itself never reaches a log line: failures are logged with the transport and status only.
 */
import { appendFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from './config.js';

export interface SmsTransport {
  readonly name: 'outbox' | 'webhook';
  /** Resolves once the message is handed over; rejects with SmsDeliveryError otherwise. */
  sendCode(to: string, code: string): Promise<void>;
  /** A message without a code (a security notice); same delivery rules. */
  sendNotice(to: string, message: string): Promise<void>;
}

export class SmsDeliveryError extends Error {
  constructor(
    readonly transport: string,
    readonly reason: string,
  ) {
    super(`SMS delivery through ${transport} failed: ${reason}`);
    this.name = 'SmsDeliveryError';
  }
}

export const otpMessage = (code: string) => `Your verification code is ${code}. It expires soon; never share it.`;

export class OutboxSmsTransport implements SmsTransport {
  readonly name = 'outbox' as const;
  private dirReady: Promise<unknown> | null = null;

  constructor(private readonly file: string) {}

  async sendCode(to: string, code: string): Promise<void> {
    await this.append({ to, code, sentAt: new Date().toISOString() });
  }

  /** A notice is a line `{ to, kind: "notice", message, sentAt }` (no `code`). */
  async sendNotice(to: string, message: string): Promise<void> {
    await this.append({ to, kind: 'notice', message, sentAt: new Date().toISOString() });
  }

  private async append(line: Record<string, string>): Promise<void> {
    this.dirReady ??= mkdir(path.dirname(path.resolve(this.file)), { recursive: true });
    try {
      await this.dirReady;
      // One write of one line: appends from concurrent requests do not interleave.
      await appendFile(this.file, `${JSON.stringify(line)}\n`, { encoding: 'utf8', mode: 0o600 });
    } catch (e) {
      this.dirReady = null;
      throw new SmsDeliveryError(this.name, (e as NodeJS.ErrnoException).code ?? 'write failed');
    }
  }
}

export class WebhookSmsTransport implements SmsTransport {
  readonly name = 'webhook' as const;

  constructor(private readonly opts: { url: string; token: string; timeoutMs: number }) {}

  async sendCode(to: string, code: string): Promise<void> {
    await this.post({ to, message: otpMessage(code), code, sentAt: new Date().toISOString() });
  }

  async sendNotice(to: string, message: string): Promise<void> {
    await this.post({ to, message, kind: 'notice', sentAt: new Date().toISOString() });
  }

  private async post(payload: Record<string, string>): Promise<void> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.opts.token) headers.authorization = `Bearer ${this.opts.token}`;
    let res: Response;
    try {
      res = await fetch(this.opts.url, {
        method: 'POST',
        headers,
        body: JSON.stringify(payload),
        signal: AbortSignal.timeout(this.opts.timeoutMs),
        redirect: 'error',
      });
    } catch (e) {
      const name = (e as Error).name;
      throw new SmsDeliveryError(this.name, name === 'TimeoutError' ? 'timeout' : 'unreachable');
    }
    // Drain the body so the connection can be reused; its content is not needed.
    await res.arrayBuffer().catch(() => undefined);
    if (!res.ok) throw new SmsDeliveryError(this.name, `status ${res.status}`);
  }
}

export function createSmsTransport(config: Pick<Config, 'sms'>): SmsTransport {
  if (config.sms.transport === 'webhook') {
    return new WebhookSmsTransport({ url: config.sms.webhookUrl, token: config.sms.webhookToken, timeoutMs: config.sms.webhookTimeoutMs });
  }
  return new OutboxSmsTransport(config.sms.outboxFile);
}
