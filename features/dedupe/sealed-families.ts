/**
 * What this wing keeps sealed under the key ring (platform/keys/sealed-families.ts): the watch-list
 * templates and the live captures of duplicate-identity cases. A key rotation re-seals both.
 */
import { sealedColumnsFamily } from '../../platform/keys/sealed-families.js';

/** The subject a case's capture is bound to (a blob copied onto another case does not open). */
export const caseSubject = (caseId: string) => `dedupe-case:${caseId}`;
/** The subject a watch-list entry's template is bound to. */
export const watchlistSubject = (entryId: string) => `watchlist:${entryId}`;

export const WATCHLIST_TEMPLATES = sealedColumnsFamily({
  name: 'watch-list templates',
  purpose: 'templates',
  table: 'watchlistEntries',
  idColumn: 'id',
  columns: ['embeddingSealed'],
  text: false,
  subjectOf: (row) => watchlistSubject(String(row.id)),
});

export const CASE_CAPTURES = sealedColumnsFamily({
  name: 'dedupe case captures',
  purpose: 'captures',
  table: 'dedupeCases',
  idColumn: 'id',
  columns: ['captureSealed'],
  text: false,
  subjectOf: (row) => caseSubject(String(row.id)),
});
