/**
 * `npm run rotate-biometric-key [-- --batch N]`: re-encrypts every face template still sealed by another
 * key than BIOMETRIC_ACTIVE_KEY_ID, in short batches, while the service runs (docs/data-protection.md,
 * "Rotating a key"). Run it with the ring holding the old AND the new key, the new one active; when it
 * reports nothing left under the old key, that key can be removed from BIOMETRIC_KEYS.
 * Resumable: interrupted, it is run again and continues with what is left. Audited (`biometric.key_rotated`).
 */
import { config } from '../platform/config.js';
import { createDb } from '../platform/database/db.js';
import { processKeyRing } from '../platform/keys/templates.js';
import { rotateTemplates } from '../features/face/template-rotation.js';

const at = process.argv.indexOf('--batch');
const batch = at > 0 ? Number(process.argv[at + 1]) : 500;
if (!Number.isInteger(batch) || batch < 1) {
  console.error('usage: npm run rotate-biometric-key [-- --batch N]');
  process.exit(2);
}

const db = createDb(config().database.url, 2);
try {
  const ring = processKeyRing();
  const result = await rotateTemplates(db, ring, { batchSize: batch, onBatch: (done) => console.log(`  ${done} re-encrypted so far`) });
  console.log(`${result.rotated} template(s) re-encrypted under ${ring.activeKeyId}; templates per key now: ${JSON.stringify(result.remainingByKey)}`);
} finally {
  await db.destroy();
}
