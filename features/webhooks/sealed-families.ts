/**
 * What this wing keeps sealed under the key ring (platform/keys/sealed-families.ts): every endpoint's
 * signing secret and, during an overlap, its previous one, bound to the endpoint's id. A key rotation
 * re-seals them, as well as those earlier versions sealed under a key derived from the signing key.
 */
import { sealedColumnsFamily } from '../../platform/keys/sealed-families.js';
import { WebhookEndpoint } from '../../models/index.js';

export const WEBHOOK_SECRETS = sealedColumnsFamily({
  name: 'webhook secrets',
  purpose: 'webhook-secrets',
  table: WebhookEndpoint.tableName,
  idColumn: 'id',
  columns: ['secretSealed', 'previousSecretSealed'],
  text: true,
  subjectOf: (row) => String(row.id),
});
