/**
 * SearchLog rows written the way POST /identify and POST /verify/self write them (the interface
 * document's fields: kind, the operator and org, the verify_self subject, the outcome, candidates
 * `[{ userId, score, rank }]`, matched user ids, the top score, latencyMs `{ liveness, embed, search,
 * total }`, escalatedAt). Tests of the consumer's data insert them directly until those routes exist.
 */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';

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

const latency = { liveness: 41, embed: 63, search: 2, total: 118 };

export function identifyRow(r: IdentifyRow): Record<string, unknown> {
  const candidates = (r.candidates ?? []).map((c, i) => ({ userId: c.userId, score: c.score, rank: i + 1 }));
  return {
    id: randomUUID(),
    kind: 'identify',
    operatorId: r.operatorId,
    orgId: r.orgId === undefined ? 'default' : r.orgId,
    userId: null,
    outcome: r.outcome ?? (candidates.length ? 'match' : 'no_match'),
    candidates: JSON.stringify(candidates),
    matchedUserIds: candidates.map((c) => c.userId),
    topScore: candidates[0]?.score ?? null,
    latencyMs: JSON.stringify(latency),
    engineVersion: 'test-engine',
    errorCode: r.errorCode ?? null,
    ...(r.createdAt ? { createdAt: r.createdAt } : {}),
  };
}

export function verifySelfRow(r: VerifySelfRow): Record<string, unknown> {
  return {
    id: randomUUID(),
    kind: 'verify_self',
    operatorId: null,
    orgId: null,
    userId: r.userId,
    outcome: r.outcome ?? 'match',
    candidates: JSON.stringify([]),
    matchedUserIds: [],
    topScore: r.score === undefined ? 0.91 : r.score,
    latencyMs: JSON.stringify(latency),
    engineVersion: 'test-engine',
    errorCode: null,
    ...(r.createdAt ? { createdAt: r.createdAt } : {}),
  };
}

/** Inserts rows and returns their ids (the referenceIds), in order. */
export async function insertLogs(db: Knex, rows: Record<string, unknown>[]): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < rows.length; i += 500) {
    await db('searchLogs').insert(rows.slice(i, i + 500));
    out.push(...rows.slice(i, i + 500).map((r) => String(r.id)));
  }
  return out;
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
