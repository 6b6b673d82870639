/** Job contract of the `search` queue: k-NN over the canonical embeddings, or one 1:1 comparison. */
import { awaitedJobContract } from './contract.js';

export const SEARCH_QUEUE = 'search' as const;

export type SearchJob =
  | {
      op: 'knn';
      embedding: number[];
      k: number;
      /**
       * The change sequence (embedding_changes.seq, as a decimal string) the worker must have applied
       * before searching: the API reads the current maximum just before enqueueing, so every write
       * that answered before this search is visible to it, on any replica (read-your-writes).
       */
      minSeq: string;
    }
  | {
      op: 'compare';
      embedding: number[];
      /** Compared against this user's canonical embedding (no search), read from PostgreSQL. */
      userId: string;
    };

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

export const searchContract = awaitedJobContract<typeof SEARCH_QUEUE, SearchJob>(SEARCH_QUEUE);
