/** Job contract of the `search` queue: k-NN over the canonical embeddings, or one 1:1 comparison. */
export const SEARCH_QUEUE = 'search' as const;

export type SearchJob =
  | {
      op: 'knn';
      embedding: number[];
      k: number;
      /** The change sequence the worker must have applied first (read-your-writes across replicas). */
      minSeq: string;
    }
  | {
      op: 'compare';
      embedding: number[];
      /** Compared against this user's canonical embedding (no search). */
      userId: string;
    };

export interface SearchHit {
  userId: string;
  score: number;
}

export type SearchResult =
  | { op: 'knn'; hits: SearchHit[]; appliedSeq: string; indexSize: number; ms: number }
  | { op: 'compare'; score: number | null; ms: number };
