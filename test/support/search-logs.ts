/**
 * SearchLog rows written the way POST /identify and POST /verify/self write them (the interface
 * document's fields: kind, the operator and org, the verify_self subject, the outcome, candidates
 * `[{ userId, score, rank }]`, matched user ids, the top score, latencyMs `{ liveness, embed, search,
 * total }`), through the repository the service writes with, so the row shape is the service's own.
 */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { SearchLogsRepository, type NewSearchLog } from '../../features/verification/search-logs-repository.js';

export interface IdentifyRow {
  operatorId: string;
  orgId?: string | null;
  outcome?: string;
  candidates?: { userId: string; score: number }[];
  createdAt?: Date;
  errorCode?: string | null;
}

export interface VerifySelfRow {
  userId: string;
  outcome?: string;
  score?: number | null;
  createdAt?: Date;
}

const latencyMs = { liveness: 41, embed: 63, search: 2, total: 118 };

export function identifyRow(r: IdentifyRow): NewSearchLog {
  const candidates = (r.candidates ?? []).map((c, i) => ({ userId: c.userId, score: c.score, rank: i + 1 }));
  return {
    id: randomUUID(),
    kind: 'identify',
    operatorId: r.operatorId,
    orgId: r.orgId === undefined ? 'default' : r.orgId,
    outcome: r.outcome ?? (candidates.length ? 'match' : 'no_match'),
    candidates,
    topScore: candidates[0]?.score ?? null,
    latencyMs,
    engineVersion: 'test-engine',
    errorCode: r.errorCode ?? null,
    createdAt: r.createdAt,
  };
}

export function verifySelfRow(r: VerifySelfRow): NewSearchLog {
  return {
    id: randomUUID(),
    kind: 'verify_self',
    userId: r.userId,
    outcome: r.outcome ?? 'match',
    candidates: [],
    topScore: r.score === undefined ? 0.91 : r.score,
    latencyMs,
    engineVersion: 'test-engine',
    createdAt: r.createdAt,
  };
}

/** Inserts entries as the service writes them and returns their ids (the referenceIds), in order. */
export function insertLogs(db: Knex, rows: NewSearchLog[]): Promise<string[]> {
  return new SearchLogsRepository(db).insertMany(rows);
}

/** A minimal RFC 4180 reader (quoted cells, doubled quotes, CRLF or LF) for asserting on exports. */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else cell += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      row.push(cell);
      cell = '';
    } else if (ch === '\n' || ch === '\r') {
      if (ch === '\r' && text[i + 1] === '\n') i++;
      row.push(cell);
      rows.push(row);
      row = [];
      cell = '';
    } else cell += ch;
  }
  if (cell !== '' || row.length) {
    row.push(cell);
    rows.push(row);
  }
  return rows;
}
