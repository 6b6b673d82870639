/**
 * The queues and their job contracts, in one place shared by the API and the workers. A worker
 * refuses to start unless it has a handler for every job of the queues it serves (workers/run-queue.ts).
 */
import { EMBED_QUEUE, type EmbedJob, type EmbedResult } from './embed.js';
import { LIVENESS_QUEUE, type LivenessJob, type LivenessJobResult } from './liveness.js';
import { SEARCH_QUEUE, type SearchJob, type SearchResult } from './search.js';
import { UPSTREAM_QUEUE, type UpstreamJob, type UpstreamResult } from './upstream.js';

export interface JobContracts {
  [LIVENESS_QUEUE]: { payload: LivenessJob; result: LivenessJobResult };
  [EMBED_QUEUE]: { payload: EmbedJob; result: EmbedResult };
  [SEARCH_QUEUE]: { payload: SearchJob; result: SearchResult };
  /** Delayed fire-and-forget jobs (enqueued with queue().add, not JobClient.run); see ./upstream.ts. */
  [UPSTREAM_QUEUE]: { payload: UpstreamJob; result: UpstreamResult };
}

export type QueueName = keyof JobContracts;
export const QUEUE_NAMES: readonly QueueName[] = [LIVENESS_QUEUE, EMBED_QUEUE, SEARCH_QUEUE, UPSTREAM_QUEUE];

/** Every job carries the instant after which nobody awaits it: a worker skips a job picked up later. */
export interface JobEnvelope<Q extends QueueName> {
  deadlineAt: number;
  payload: JobContracts[Q]['payload'];
}

export * from './embed.js';
export * from './liveness.js';
export * from './search.js';
export * from './upstream.js';
