/**
 * `npm run rotate-biometric-key [-- --batch N]`: re-seals every sealed family (face templates, watch-list
 * templates, dedupe case captures, staff TOTP secrets, webhook secrets: processes/key-rotation.ts)
 * still under another key than BIOMETRIC_ACTIVE_KEY_ID, or in a layout of earlier versions, in short
 * batches, while the service runs (docs/data-protection.md, "Rotating a key"). Run it with the ring
 * holding the old AND the new key, the new one active; when it reports no value left under the old
 * key, that key can be removed from BIOMETRIC_KEYS. Resumable: interrupted, it is run again and
 * continues with what is left. Audited (`biometric.key_rotated`).
 */
import { config } from '../processes/config.js';
import { createDb } from '../platform/database/db.js';
import { processKeyRing } from '../platform/keys/templates.js';
import { rotateKeyRing } from '../processes/key-rotation.js';

const at = process.argv.indexOf('--batch');
const batch = at > 0 ? Number(process.argv[at + 1]) : 500;
if (!Number.isInteger(batch) || batch < 1) {
  console.error('usage: npm run rotate-biometric-key [-- --batch N]');
  process.exit(2);
}

const db = createDb(config().database.url, 2);
try {
  const ring = processKeyRing();
  console.log(`re-sealing every sealed family under ${ring.activeKeyId}`);
  const result = await rotateKeyRing(db, ring, {
    batchSize: batch,
    onFamily: (f) => console.log(`  ${f.family}: ${f.resealed} re-sealed; now per key: ${JSON.stringify(f.byKey)}`),
  });
  console.log(
    result.keysStillInUse.length
      ? `keys still in use (keep them in BIOMETRIC_KEYS): ${result.keysStillInUse.join(', ')}`
      : `every sealed value is under ${ring.activeKeyId}: the other keys can be removed from BIOMETRIC_KEYS`,
  );
} finally {
  await db.destroy();
}
