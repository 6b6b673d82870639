/**
 * The fail-fast gate of a sharded search (SEARCH_SHARDS > 1; ./admission.ts is the queues' gate): a
 * shard's replicas serve its consumer group of the broadcast stream, not a BullMQ queue, so they are
 * counted by their beats (`shardReplicas`, platform/jobs/search-shards.ts: one command for all shards). A
 * shard with none answers 503 `dependency_unavailable` with Retry-After at once, naming it, instead of
 * after SEARCH_SHARD_TIMEOUT_MS (the same 503 as a shard that does not answer in time). Like the queues'
 * gate: a healthy sample is reused for `sampleMs`, an unhealthy one never (a replica that has just
 * joined is seen at the next request), and concurrent requests share one sample.
 */
import type { Redis } from 'ioredis';
import { AppError } from '../errors.js';
import { shardReplicas } from '../jobs/search-shards.js';
import type { AdmissionOptions } from './admission.js';

interface ShardSample {
  at: number;
  count: number;
  replicas: { shard: number; replicas: number }[];
}

export class ShardAdmission {
  private sample: ShardSample | undefined;
  private sampling: Promise<ShardSample> | undefined;

  constructor(
    private readonly conn: Pick<Redis, 'eval' | 'status'>,
    private readonly redisPrefix: string,
    private readonly opts: Pick<AdmissionOptions, 'sampleMs' | 'checkTimeoutMs' | 'retryAfterSeconds'>,
  ) {}

  /** Resolves when every one of `count` shards has a live replica; else throws the 503 to answer. */
  async admit(count: number): Promise<void> {
    let sample = this.sample;
    const fresh = sample && sample.count === count && Date.now() - sample.at < this.opts.sampleMs && missing(sample).length === 0;
    if (!fresh) sample = await this.take(count);
    const away = missing(sample!);
    if (away.length) {
      throw new AppError('dependency_unavailable', 'A search shard has no replica running; try again shortly', {
        retryAfter: this.opts.retryAfterSeconds,
        details: { reason: 'search_shard_unavailable', shards: away },
      });
    }
  }

  private take(count: number): Promise<ShardSample> {
    this.sampling ??= this.read(count).finally(() => {
      this.sampling = undefined;
    });
    return this.sampling;
  }

  private async read(count: number): Promise<ShardSample> {
    const unavailable = (cause?: unknown) =>
      new AppError('dependency_unavailable', 'The job queue (Redis) is unavailable', { retryAfter: this.opts.retryAfterSeconds, cause });
    // A lost connection is a 503 at once (a first one still connecting is given the check's time).
    if (this.conn.status === 'end' || this.conn.status === 'close') throw unavailable();
    let timer: NodeJS.Timeout | undefined;
    const replicas = await Promise.race([
      shardReplicas(this.conn, this.redisPrefix, count),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Redis did not answer within ${this.opts.checkTimeoutMs} ms`)), this.opts.checkTimeoutMs);
      }),
    ])
      .catch((e: unknown) => {
        throw unavailable(e);
      })
      .finally(() => clearTimeout(timer));
    const sample = { at: Date.now(), count, replicas };
    this.sample = sample;
    return sample;
  }
}

const missing = (s: ShardSample): number[] => s.replicas.filter((r) => r.replicas === 0).map((r) => r.shard);
