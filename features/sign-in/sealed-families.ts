/**
 * What this wing keeps sealed under the key ring (platform/keys/sealed-families.ts): the staff TOTP
 * secrets, confirmed and pending, bound to the operator's id. A key rotation re-seals them, as well as
 * those earlier versions sealed under MFA_ENCRYPTION_KEY or a key derived from the signing key.
 */
import { sealedColumnsFamily } from '../../platform/keys/sealed-families.js';
import { Operator } from '../../models/index.js';

export const TOTP_SECRETS = sealedColumnsFamily({
  name: 'staff TOTP secrets',
  purpose: 'totp-secrets',
  table: Operator.tableName,
  idColumn: 'id',
  columns: ['mfaSecret', 'mfaPendingSecret'],
  text: true,
  subjectOf: (row) => String(row.id),
});
