/**
 * A shard replica's side of the broadcast search (SEARCH_SHARDS > 1; platform/jobs/search-shards.ts):
 * reads its shard's consumer group of the shard count's stream, searches its own rows for every entry
 * (read-your-writes through `minSeq`, as a `knn` job), pushes the shard's exact top-k to the caller's
 * reply list, and acknowledges the entry. Entries read together are searched together (the replica
 * micro-batches them into one engine call). An entry read after its deadline is acknowledged and
 * skipped: its caller has already answered 503.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { FaceHandoff } from '../../../platform/face-path/handoff.js';
import { pushReply } from '../../../platform/face-path/replies.js';
import { takeSearchEmbedding } from '../../../platform/face-path/search-embedding.js';
import {
  beatShardReplica,
  leaveShardReplicas,
  parseShardMessage,
  SHARD_REPLICA_BEAT_MS,
  searchShardStream,
  shardGroup,
  shardReplyId,
  type ShardSearchResult,
  type ShardSpec,
} from '../../../platform/jobs/search-shards.js';
import type { Logger } from '../../../platform/logger.js';
import type { IndexReplica } from './replica.js';

export interface ShardConsumerStats {
  searched: number;
  skippedExpired: number;
  failed: number;
}

/** Consumers of a group idle longer than this are dropped at start (replicas that died): their names only. */
const DEAD_CONSUMER_IDLE_MS = 10 * 60_000;
/** The blocking read's timeout (under the connection's stalled-socket time, so a silent link shows). */
const BLOCK_MS = 1000;

export class ShardConsumer {
  readonly stats: ShardConsumerStats = { searched: 0, skippedExpired: 0, failed: 0 };
  readonly consumer = `replica-${randomUUID()}`;
  private closing = false;
  private loop: Promise<void> | undefined;
  private beat: NodeJS.Timeout | undefined;
  private inFlight = 0;
  private readonly stream: string;
  private readonly group: string;

  constructor(
    private readonly opts: {
      /** Blocking reads only. */
      blocking: Redis;
      /** Replies, acknowledgements and side values. */
      redis: Redis;
      handoff: FaceHandoff;
      replica: Pick<IndexReplica, 'knn'>;
      shard: ShardSpec;
      redisPrefix: string;
      concurrency: number;
      logger: Logger;
    },
  ) {
    this.stream = searchShardStream(opts.redisPrefix, opts.shard.count);
    this.group = shardGroup(opts.shard.index);
  }

  /** Joins the group (made at the stream's end if new: older entries are past their deadline) and serves. */
  async start(): Promise<void> {
    await this.join();
    await this.dropDeadConsumers().catch(() => {});
    this.loop = this.consume();
    // Live from now on for the web processes' gate and /health (platform/jobs/search-shards.ts).
    await this.beatOnce();
    this.beat = setInterval(() => void this.beatOnce(), SHARD_REPLICA_BEAT_MS);
    this.beat.unref();
  }

  private async beatOnce(): Promise<void> {
    if (this.closing) return;
    await beatShardReplica(this.opts.redis, this.opts.redisPrefix, this.opts.shard, this.consumer).catch((e: Error) =>
      this.opts.logger.warn({ err: e.message }, 'shard replica beat failed'),
    );
  }

  private async join(): Promise<void> {
    try {
      await this.opts.redis.xgroup('CREATE', this.stream, this.group, '$', 'MKSTREAM');
    } catch (e) {
      if (!/BUSYGROUP/.test((e as Error).message)) throw e;
    }
  }

  private async dropDeadConsumers(): Promise<void> {
    const rows = (await this.opts.redis.xinfo('CONSUMERS', this.stream, this.group)) as unknown[][];
    for (const row of rows) {
      const f = new Map<string, unknown>();
      for (let i = 0; i + 1 < row.length; i += 2) f.set(String(row[i]), row[i + 1]);
      if (Number(f.get('idle')) > DEAD_CONSUMER_IDLE_MS) await this.opts.redis.xgroup('DELCONSUMER', this.stream, this.group, String(f.get('name')));
    }
  }

  private async consume(): Promise<void> {
    const { blocking, concurrency } = this.opts;
    while (!this.closing) {
      const room = concurrency - this.inFlight;
      if (room <= 0) {
        await new Promise((r) => setTimeout(r, 1));
        continue;
      }
      let read: [string, [string, string[]][]][] | null;
      try {
        read = (await blocking.xreadgroup('GROUP', this.group, this.consumer, 'COUNT', room, 'BLOCK', BLOCK_MS, 'STREAMS', this.stream, '>')) as
          [string, [string, string[]][]][] | null;
      } catch (e) {
        if (this.closing) return;
        const msg = (e as Error).message;
        // The stream or group went away (a Redis fail-over to a replica that lacks it, a flush): join again.
        if (/NOGROUP/.test(msg)) await this.join().catch(() => {});
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      for (const [, entries] of read ?? []) for (const [entryId, fields] of entries) this.serve(entryId, fields);
    }
  }

  /** One entry: searched without waiting for the others (they meet in the replica's next batch). */
  private serve(entryId: string, fields: string[]): void {
    this.inFlight++;
    void this.handle(entryId, fields)
      .catch((e: Error) => {
        this.stats.failed++;
        this.opts.logger.warn({ err: e.message }, 'shard search failed');
      })
      .finally(() => {
        this.inFlight--;
        void this.opts.redis.xack(this.stream, this.group, entryId).catch(() => {});
      });
  }

  private async handle(entryId: string, fields: string[]): Promise<void> {
    const raw = fields[fields.indexOf('m') + 1];
    const m = raw === undefined ? null : parseShardMessage(raw, this.opts.shard.count);
    if (!m) throw new Error(`malformed shard search entry ${entryId}`);
    if (Date.now() >= m.deadlineAt) {
      this.stats.skippedExpired++;
      return;
    }
    const id = shardReplyId(m.id, this.opts.shard.index);
    try {
      const embedding = await takeSearchEmbedding(this.opts.handoff, m.refs[this.opts.shard.index]!);
      const r = await this.opts.replica.knn(embedding, m.k, m.minSeq, m.excludeUserId ?? null);
      if (r.op !== 'knn') throw new Error('the replica answered another op');
      const result: ShardSearchResult = { shard: this.opts.shard.index, hits: r.hits, appliedSeq: r.appliedSeq, indexSize: r.indexSize, ms: r.ms };
      this.stats.searched++;
      await pushReply(this.opts.redis, m.replyTo, { id, ok: true, result });
    } catch (e) {
      await pushReply(this.opts.redis, m.replyTo, { id, ok: false, error: (e as Error).message }).catch(() => {});
      throw e;
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.beat);
    // Out of the live replicas first: no new search is sent to this shard on its account.
    await leaveShardReplicas(this.opts.redis, this.opts.redisPrefix, this.opts.shard, this.consumer).catch(() => {});
    this.opts.blocking.disconnect(); // ends the blocking read
    await this.loop?.catch(() => {});
    // Entries in flight finish (their replies are still awaited).
    while (this.inFlight > 0) await new Promise((r) => setTimeout(r, 5));
    // A clean stop leaves the group too (nothing of ours is pending).
    await this.opts.redis.xgroup('DELCONSUMER', this.stream, this.group, this.consumer).catch(() => {});
  }
}
