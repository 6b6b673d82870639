/**
 * How the bytes of a face request travel between its stages: short-lived Redis values, sealed, named
 * in the jobs by a random ref, and taken (GETDEL) by the stage that reads them.
 *
 *   image    the normalised upload: written by the API just before the `liveness` job (same
 *            connection, one round trip: JobClient.run `withValues`), taken by the liveness worker;
 *   aligned  the chosen face aligned to the ArcFace template (112x112x3 at 16 bits, 75 KB): written by
 *            the liveness worker, taken by the embed worker;
 *   embedding  the probe of a search (512 float32, 2 KB): written by the embed worker before the
 *            search it adds, or by the API just before a search job of its own; taken by the search
 *            worker (./search-embedding.ts).
 *
 * Why not in the job payload and result: a payload is JSON (the image as base64, a third larger,
 * stringified by BullMQ, copied into a Lua call), and the aligned face as a result went worker → Redis
 * → API → Redis → worker, parsed and re-serialised by the web process, which never reads it
 * (docs/performance.md §4). As values they cross Redis once each, as binary.
 *
 * Security: each value is sealed (AES-256-GCM, ./sealing.ts) under a key derived from a key-ring key,
 * which only the processes hold, and the request's salt, which lives only in the API's memory and the
 * job payloads (deleted when each job finishes): Redis holds the value and the salt, never the key.
 * Each value expires at the request's deadline at the latest, and its reader deletes it as it reads
 * it. No face is in clear in Redis.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { HandoffSealer } from './sealing.js';

export type HandoffKind = 'image' | 'aligned' | 'embedding';

export const newHandoffRef = (): string => randomUUID();

export const handoffKey = (redisPrefix: string, kind: HandoffKind, ref: string): string => `${redisPrefix}:face:${kind}:${ref}`;

const REF = /^[0-9a-f-]{36}$/;

export interface FaceHandoff {
  /** Seals what is put and opens what is taken (this process's key ring). */
  readonly sealer: HandoffSealer;
  /**
   * Keeps a sealed value until `deadlineAt` (epoch ms); returns its ref (`ref` when given: a caller
   * that names the value in a job sent right behind it). The write is issued before this returns.
   */
  put(kind: HandoffKind, sealed: Buffer, deadlineAt: number, ref?: string): Promise<string>;
  /** Takes it (once); null when it expired, was taken, or never existed. */
  take(kind: HandoffKind, ref: string): Promise<Buffer | null>;
}

export class RedisFaceHandoff implements FaceHandoff {
  constructor(
    private readonly redis: Redis,
    private readonly redisPrefix: string,
    readonly sealer: HandoffSealer,
  ) {}

  async put(kind: HandoffKind, sealed: Buffer, deadlineAt: number, ref = newHandoffRef()): Promise<string> {
    await this.redis.set(handoffKey(this.redisPrefix, kind, ref), sealed, 'PX', Math.max(1, deadlineAt - Date.now()));
    return ref;
  }

  async take(kind: HandoffKind, ref: string): Promise<Buffer | null> {
    if (!REF.test(ref)) return null;
    return this.redis.getdelBuffer(handoffKey(this.redisPrefix, kind, ref));
  }
}
