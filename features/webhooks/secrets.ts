/**
 * Webhook signing secrets: generated as Standard Webhooks expects (`whsec_` + base64 of 32 random
 * bytes), shown to the administrator once, and stored sealed (AES-256-GCM, the endpoint id as
 * associated data, so a sealed secret copied onto another endpoint's row does not open). The key is
 * 32 bytes the composition root derives from the deployment's signing key (TokenService.deriveSecret),
 * never stored beside the sealed values; the worker that signs deliveries opens them with the same key.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const PREFIX = 'whsec_';
const VERSION = 'v1';

export function newWebhookSecret(): string {
  return PREFIX + randomBytes(32).toString('base64');
}

export function sealWebhookSecret(key: Buffer, endpointId: string, secret: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(endpointId));
  const body = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return [VERSION, iv.toString('base64'), cipher.getAuthTag().toString('base64'), body.toString('base64')].join('.');
}

export function openWebhookSecret(key: Buffer, endpointId: string, sealed: string): string {
  const [version, iv, tag, body] = sealed.split('.');
  if (version !== VERSION || !iv || !tag || !body) throw new Error('unreadable sealed webhook secret');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'));
  decipher.setAAD(Buffer.from(endpointId));
  decipher.setAuthTag(Buffer.from(tag, 'base64'));
  return Buffer.concat([decipher.update(Buffer.from(body, 'base64')), decipher.final()]).toString('utf8');
}

/** The purpose string the key is derived under (TokenService.deriveSecret). */
export const WEBHOOK_SECRET_KEY_PURPOSE = 'webhook-endpoint-secrets';
