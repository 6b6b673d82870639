// Canonical embeddings are written through shared/repositories/embeddings.ts; this re-export only keeps
// bench/identify-e2e.ts (owned elsewhere) compiling until its import moves there. Delete it then.
export { upsertCanonical } from '../../shared/repositories/embeddings.js';
