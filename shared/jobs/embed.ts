/** Job contract of the `embed` queue: 5-point alignment to the ArcFace template and the 512-d embedding. */
export const EMBED_QUEUE = 'embed' as const;

export interface EmbedJob {
  imageB64: string;
  landmarks5: [number, number][];
}

export interface EmbedResult {
  /** 512 floats, L2-normalised. */
  embedding: number[];
  engineVersion: string;
  ms: number;
}
