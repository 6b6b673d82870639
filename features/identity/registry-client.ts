/**
 * The service's only way to the identity registry: HTTP to REGISTRY_URL (by default this server's own
 * simulator under /api; a real registry adapter replaces it by changing that URL). Every call has the
 * REGISTRY_TIMEOUT_MS deadline; a timeout, a refused connection, a 5xx or an answer that is not what
 * the contract says becomes 502 `registry_unavailable`. A 404 is "no such number" (null). Redirects are
 * not followed (a registry that sends us elsewhere is misconfigured or hijacked: the number and the
 * photo must not travel to another host), and the body is read up to REGISTRY_MAX_BODY_BYTES only.
 */
import { AppError } from '../../platform/errors.js';
import type { Logger } from '../../platform/logger.js';
import type { Registry } from '../users/index.js';
import { BodyTooLargeError, readBoundedText } from '../../platform/http/bounded-body.js';

export type { Registry };

/** A registry record as the service uses it (the photo only when asked for). */
export interface RegistryRecord {
  nin?: string;
  bvn?: string;
  firstName: string;
  lastName: string;
  middleName?: string | null;
  dateOfBirth: string;
  gender: string;
  photo?: Buffer;
  photoMime?: string;
}

export interface LookupOptions {
  includePhoto?: boolean;
  /** Outside production only: forwarded as `X-Registry-Fault` so tests can make the simulator hang or fail. */
  fault?: string | null;
}

export interface RegistryClientOptions {
  registryUrl: string;
  registryTimeoutMs: number;
  isProduction: boolean;
  /** Largest answer read (a record with its photo, base64); beyond it 502. */
  maxBodyBytes?: number;
  logger?: Logger;
}

const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;

const NUMBER = /^[0-9]{11}$/;

export class RegistryClient {
  constructor(private readonly opts: RegistryClientOptions) {}

  private unavailable(registry: Registry, reason: string): AppError {
    this.opts.logger?.warn({ registry, reason }, 'identity registry unavailable');
    return new AppError('registry_unavailable', 'The identity registry is unavailable; try again later', { details: { registry } });
  }

  /** Looks a number up; null when the registry has no such record. */
  async lookup(registry: Registry, number: string, opts: LookupOptions = {}): Promise<RegistryRecord | null> {
    if (!NUMBER.test(number)) throw new AppError('validation_failed', `A ${registry.toUpperCase()} has exactly 11 digits`);
    const url = `${this.opts.registryUrl}/${registry}/${number}${opts.includePhoto ? '?includePhoto=true' : ''}`;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (opts.fault && !this.opts.isProduction) headers['x-registry-fault'] = opts.fault;

    let res: Response;
    let text: string;
    try {
      // One deadline for the whole exchange, body included: a registry that stalls mid-answer is down too.
      const signal = AbortSignal.timeout(this.opts.registryTimeoutMs);
      res = await fetch(url, { headers, signal, redirect: 'manual' });
      if (res.status >= 300 && res.status < 400) {
        await res.body?.cancel().catch(() => {});
        throw this.unavailable(registry, `answered a redirect (${res.status}), which is not followed`);
      }
      text = await readBoundedText(res, this.opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES);
    } catch (e) {
      if (e instanceof AppError) throw e;
      if (e instanceof BodyTooLargeError) throw this.unavailable(registry, e.message);
      const name = (e as Error)?.name;
      throw this.unavailable(
        registry,
        name === 'TimeoutError' || name === 'AbortError' ? `timeout after ${this.opts.registryTimeoutMs} ms` : 'connection failed',
      );
    }
    if (res.status === 404) return null;
    if (res.status !== 200) throw this.unavailable(registry, `answered ${res.status}`);

    let body: Record<string, unknown>;
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      throw this.unavailable(registry, 'answered a body that is not JSON');
    }
    const str = (k: string) => (typeof body[k] === 'string' && body[k] !== '' ? (body[k] as string) : undefined);
    const firstName = str('firstName');
    const lastName = str('lastName');
    const dateOfBirth = str('dateOfBirth');
    const gender = str('gender');
    if (!firstName || !lastName || !dateOfBirth || !/^\d{4}-\d{2}-\d{2}$/.test(dateOfBirth) || !gender || str(registry) !== number) {
      throw this.unavailable(registry, 'answered a record without the expected fields');
    }
    const record: RegistryRecord = {
      ...(str('nin') ? { nin: str('nin') } : {}),
      ...(str('bvn') ? { bvn: str('bvn') } : {}),
      firstName,
      lastName,
      middleName: str('middleName') ?? null,
      dateOfBirth,
      gender,
    };
    if (opts.includePhoto) {
      const photo = str('photo');
      if (!photo) throw this.unavailable(registry, 'answered a record without the requested photo');
      record.photo = Buffer.from(photo, 'base64');
      record.photoMime = str('photoMime') ?? 'application/octet-stream';
    }
    return record;
  }
}
