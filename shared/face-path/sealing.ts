/**
 * Embeddings that cross Redis as a job RESULT are sealed. BullMQ copies every job's return value into
 * the queue's events stream (XADD ... returnvalue), which outlives the job; so the API puts a fresh
 * 256-bit key in the job's payload (the job hash, deleted as soon as the result is read) and the worker
 * returns the embedding encrypted with it (AES-256-GCM). What stays in the stream is ciphertext whose
 * key no longer exists anywhere.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { decodeEmbedding, encodeEmbedding } from '../embeddings.js';

export interface SealedEmbedding {
  iv: string;
  tag: string;
  data: string;
}

export const newResultKey = (): string => randomBytes(32).toString('base64');

/** Bytes sealed the same way (the aligned face the liveness stage hands to the embed stage). */
export function sealBytes(bytes: Uint8Array, keyB64: string): SealedEmbedding {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', Buffer.from(keyB64, 'base64'), iv);
  const data = Buffer.concat([cipher.update(bytes), cipher.final()]);
  return { iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') };
}

export function openBytes(sealed: SealedEmbedding, keyB64: string): Buffer {
  const decipher = createDecipheriv('aes-256-gcm', Buffer.from(keyB64, 'base64'), Buffer.from(sealed.iv, 'base64'));
  decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'));
  return Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()]);
}

export function sealEmbedding(embedding: ArrayLike<number>, keyB64: string): SealedEmbedding {
  return sealBytes(encodeEmbedding(embedding), keyB64);
}

export function openEmbedding(sealed: SealedEmbedding, keyB64: string): number[] {
  return Array.from(decodeEmbedding(openBytes(sealed, keyB64)));
}

/** The same sealing as one compact buffer (iv ‖ tag ‖ ciphertext), for bytes kept in Redis as a value. */
export function sealToBuffer(bytes: Uint8Array, keyB64: string): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', Buffer.from(keyB64, 'base64'), iv);
  const data = Buffer.concat([cipher.update(bytes), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), data]);
}

/** Opens what sealToBuffer sealed; throws on a wrong key or altered bytes. */
export function openBuffer(sealed: Buffer, keyB64: string): Buffer {
  if (sealed.length < 28) throw new RangeError('sealed buffer too short');
  const decipher = createDecipheriv('aes-256-gcm', Buffer.from(keyB64, 'base64'), sealed.subarray(0, 12));
  decipher.setAuthTag(sealed.subarray(12, 28));
  return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]);
}
