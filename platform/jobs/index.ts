/**
 * The queues and their job contracts, shared by the API and the workers: the floor's here, a wing's own
 * queue in its folder, listed by its manifest and registered when processes/wings.ts composes the wings,
 * so the composed table below is the one place that names every queue. Each contract
 * (./contract.ts) declares whether the API awaits its jobs or defers them, their options and how they
 * are enqueued. A worker refuses to start unless it has a handler for every queue it serves
 * (platform/worker-runtime/run-queue.ts).
 */
import type { DeferredJobContract, JobEnvelope as Envelope } from './contract.js';
import { EMBED_QUEUE, embedContract, type EmbedJob, type EmbedResult } from './embed.js';
import { LIGHT_QUEUE, lightContract, type LightJob, type LightJobResult } from './light.js';
import { LIVENESS_QUEUE, livenessContract, type LivenessJob, type LivenessJobResult } from './liveness.js';
import { SEARCH_QUEUE, searchContract, type SearchJob, type SearchResult } from './search.js';
import { UPSTREAM_QUEUE, upstreamContract, type UpstreamJob, type UpstreamResult } from './upstream.js';

/**
 * Every queue's payload and result: the floor's below (the face path's protocol and the upstream
 * worker's); a wing's own deferred queue adds itself by declaration merging beside its contract
 * (`declare module '../../platform/jobs/index.js' { interface JobContracts { ... } }`) and lists the
 * contract in its manifest (`jobs`).
 */
export interface JobContracts {
  [LIVENESS_QUEUE]: { payload: LivenessJob; result: LivenessJobResult };
  [EMBED_QUEUE]: { payload: EmbedJob; result: EmbedResult };
  [LIGHT_QUEUE]: { payload: LightJob; result: LightJobResult };
  [SEARCH_QUEUE]: { payload: SearchJob; result: SearchResult };
  [UPSTREAM_QUEUE]: { payload: UpstreamJob; result: UpstreamResult };
}

export type QueueName = keyof JobContracts;

type FloorQueueName = typeof LIVENESS_QUEUE | typeof EMBED_QUEUE | typeof LIGHT_QUEUE | typeof SEARCH_QUEUE | typeof UPSTREAM_QUEUE;

/** The floor's queues: their declared delivery, options and enqueue function. */
const FLOOR_JOB_CONTRACTS = {
  [LIVENESS_QUEUE]: livenessContract,
  [EMBED_QUEUE]: embedContract,
  [LIGHT_QUEUE]: lightContract,
  [SEARCH_QUEUE]: searchContract,
  [UPSTREAM_QUEUE]: upstreamContract,
} as const satisfies { [Q in FloorQueueName]: { queue: Q; delivery: 'awaited' | 'deferred' } };

/** A wing's queue: deferred (the face path's awaited queues are the floor's). */
type WingJobContract<Q extends QueueName> = DeferredJobContract<Q, JobContracts[Q]['payload']>;

/** Each queue's declared delivery, options and enqueue function: the floor's, and the wings' once processes/wings.ts registered them. */
export const JOB_CONTRACTS = { ...FLOOR_JOB_CONTRACTS } as {
  readonly [Q in QueueName]: Q extends FloorQueueName ? (typeof FLOOR_JOB_CONTRACTS)[Q] : WingJobContract<Q>;
};

/** Every queue's name: the floor's, then the wings' in the order processes/wings.ts composes them. */
export const QUEUE_NAMES: readonly QueueName[] = [LIVENESS_QUEUE, EMBED_QUEUE, LIGHT_QUEUE, SEARCH_QUEUE, UPSTREAM_QUEUE];

/** Adds a wing's deferred queues (platform/wing.ts `composeWings`); a queue name is taken once. Idempotent. */
export function registerJobContracts(wing: string, contracts: readonly DeferredJobContract<string, never>[]): void {
  const table = JOB_CONTRACTS as unknown as Record<string, unknown>;
  for (const contract of contracts) {
    if (table[contract.queue] === contract) continue;
    if (contract.queue in table) throw new Error(`Queue "${contract.queue}" of wing ${wing} is already declared`);
    table[contract.queue] = contract;
    (QUEUE_NAMES as string[]).push(contract.queue);
  }
}

/** The queues whose results the API awaits (JobClient.run): the floor's face path. */
export type AwaitedQueueName = { [Q in FloorQueueName]: (typeof FLOOR_JOB_CONTRACTS)[Q]['delivery'] extends 'awaited' ? Q : never }[FloorQueueName];
export const AWAITED_QUEUE_NAMES = (Object.keys(FLOOR_JOB_CONTRACTS) as FloorQueueName[]).filter(
  (q): q is AwaitedQueueName => FLOOR_JOB_CONTRACTS[q].delivery === 'awaited',
);

/** What an awaited job of queue Q carries in Redis. */
export type JobEnvelope<Q extends QueueName> = Envelope<JobContracts[Q]['payload']>;

export * from './embed.js';
export * from './light.js';
export * from './liveness.js';
export * from './search.js';
export * from './upstream.js';
