/**
 * The queues and their job contracts, in one place shared by the API and the workers. Each contract
 * (./contract.ts) declares whether the API awaits its jobs or defers them, their options and how they
 * are enqueued. A worker refuses to start unless it has a handler for every queue it serves
 * (platform/worker-runtime/run-queue.ts).
 */
import type { JobEnvelope as Envelope } from './contract.js';
import { EMBED_QUEUE, embedContract, type EmbedJob, type EmbedResult } from './embed.js';
import { LIGHT_QUEUE, lightContract, type LightJob, type LightJobResult } from './light.js';
import { LIVENESS_QUEUE, livenessContract, type LivenessJob, type LivenessJobResult } from './liveness.js';
import { SEARCH_QUEUE, searchContract, type SearchJob, type SearchResult } from './search.js';
import { UPSTREAM_QUEUE, upstreamContract, type UpstreamJob, type UpstreamResult } from './upstream.js';
import { WEBHOOK_QUEUE, webhookContract, type WebhookDeliveryJob, type WebhookDeliveryResult } from './webhook.js';

export interface JobContracts {
  [LIVENESS_QUEUE]: { payload: LivenessJob; result: LivenessJobResult };
  [EMBED_QUEUE]: { payload: EmbedJob; result: EmbedResult };
  [LIGHT_QUEUE]: { payload: LightJob; result: LightJobResult };
  [SEARCH_QUEUE]: { payload: SearchJob; result: SearchResult };
  [UPSTREAM_QUEUE]: { payload: UpstreamJob; result: UpstreamResult };
  [WEBHOOK_QUEUE]: { payload: WebhookDeliveryJob; result: WebhookDeliveryResult };
}

export type QueueName = keyof JobContracts;

/** Each queue's declared delivery, options and enqueue function. */
export const JOB_CONTRACTS = {
  [LIVENESS_QUEUE]: livenessContract,
  [EMBED_QUEUE]: embedContract,
  [LIGHT_QUEUE]: lightContract,
  [SEARCH_QUEUE]: searchContract,
  [UPSTREAM_QUEUE]: upstreamContract,
  [WEBHOOK_QUEUE]: webhookContract,
} as const satisfies { [Q in QueueName]: { queue: Q; delivery: 'awaited' | 'deferred' } };

export const QUEUE_NAMES: readonly QueueName[] = [LIVENESS_QUEUE, EMBED_QUEUE, LIGHT_QUEUE, SEARCH_QUEUE, UPSTREAM_QUEUE, WEBHOOK_QUEUE];

/** The queues whose results the API awaits (JobClient.run). */
export type AwaitedQueueName = { [Q in QueueName]: (typeof JOB_CONTRACTS)[Q]['delivery'] extends 'awaited' ? Q : never }[QueueName];
export const AWAITED_QUEUE_NAMES = QUEUE_NAMES.filter((q): q is AwaitedQueueName => JOB_CONTRACTS[q].delivery === 'awaited');

/** What an awaited job of queue Q carries in Redis. */
export type JobEnvelope<Q extends QueueName> = Envelope<JobContracts[Q]['payload']>;

export * from './embed.js';
export * from './light.js';
export * from './liveness.js';
export * from './search.js';
export * from './upstream.js';
export * from './webhook.js';
