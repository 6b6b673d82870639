/** Job contract of the `search` queue: k-NN over the canonical embeddings, or one 1:1 comparison. */
import type { SealedEmbeddingRef } from '../face-path/search-embedding.js';
import { awaitedJobContract } from './contract.js';

export const SEARCH_QUEUE = 'search' as const;

/** What the API asks of a search, before the embedding exists (a follow-on job's request: EmbedJob `searchNext`). */
export type SearchRequest =
  | {
      op: 'knn';
      k: number;
      /**
       * The change sequence (embedding_changes.seq, as a decimal string) the worker must have applied
       * before searching: the API reads the current maximum before enqueueing the request's first job,
       * so every write that answered before this search is visible to it, on any replica (read-your-writes).
       */
      minSeq: string;
      /**
       * Left out of the hits (the k best OTHER users): a duplicate check at link searches everyone but
       * the user linking, whose own canonical embedding (a NIN linked before a BVN) is no duplicate.
       */
      excludeUserId?: string;
    }
  | {
      /**
       * The API compares in its own process now (features/face/face-service.ts `comparisonScore`, one
       * place for /verify/self and verify-face); the op stays for a caller of an older release during a
       * rolling deploy.
       */
      op: 'compare';
      /** Compared against this user's canonical embedding (no search), read from PostgreSQL. */
      userId: string;
    };

/**
 * A search job: the request and where the probe's embedding (512 floats, L2-normalised) waits, sealed,
 * until the request's deadline (platform/face-path/search-embedding.ts).
 */
export type SearchJob = SearchRequest & SealedEmbeddingRef;

/**
 * The search the face process adds itself as soon as it has the embedding (EmbedFollowOn and EmbedJob
 * `searchNext`), under the id the API chose and awaits: no trip through the API between the stages.
 */
export interface SearchFollowOn {
  jobId: string;
  request: SearchRequest;
}

export interface SearchHit {
  userId: string;
  /** Cosine similarity (inner product of unit vectors), best first. */
  score: number;
}

export type SearchResult =
  | {
      op: 'knn';
      hits: SearchHit[];
      /** The change sequence this replica had applied when it searched (>= minSeq). */
      appliedSeq: string;
      indexSize: number;
      ms: number;
    }
  | {
      op: 'compare';
      /** null when the user has no canonical embedding of the running engine version. */
      score: number | null;
      reason?: 'no_embedding' | 'engine_version_mismatch';
      ms: number;
    };

/**
 * A capture's search, added by the face process with the embedding, goes on the search follow-on list
 * (about 9 Redis commands instead of a BullMQ job's 55-60); searches the API adds itself (dedupe,
 * the watch-list, `searchByEmbedding`) stay BullMQ jobs.
 */
export const searchContract = awaitedJobContract<typeof SEARCH_QUEUE, SearchJob>(SEARCH_QUEUE, { followOnsOnList: true });
