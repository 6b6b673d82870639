/**
 * Webhook signing secrets: generated as Standard Webhooks expects (`whsec_` + base64 of 32 random
 * bytes), shown to the administrator once, and stored sealed for the key ring's `webhook-secrets`
 * purpose with the endpoint id as subject (platform/keys/README.md), so a sealed secret copied onto
 * another endpoint's row does not open. The ring's keys are never stored beside the sealed values; the
 * worker that signs deliveries opens them with the same ring. The signing key of access tokens plays
 * no part: rotating it changes nothing here.
 */
import { randomBytes } from 'node:crypto';
import type { KeyRing } from '../../platform/keys/key-ring.js';

const PREFIX = 'whsec_';

export function newWebhookSecret(): string {
  return PREFIX + randomBytes(32).toString('base64');
}

export function sealWebhookSecret(ring: KeyRing, endpointId: string, secret: string): string {
  return ring.sealText('webhook-secrets', secret, endpointId);
}

/** Also opens the secrets earlier versions sealed (platform/keys/legacy-formats.ts) until the rotation re-seals them. */
export function openWebhookSecret(ring: KeyRing, endpointId: string, sealed: string): string {
  return ring.openText('webhook-secrets', sealed, endpointId);
}
