/**
 * Paging, in one place: every list of the API takes `?page&pageSize` (PageQuery in
 * platform/http/schemas.ts: 1 and 20 by default, at most 100) and answers `{ items, page, pageSize,
 * total }` (Page there; SPEC 13.3 "lists"). A repository limits its ordered query with `onePage` and
 * counts the same filter; its service answers `pageOf`.
 */
import type { Model, QueryBuilder } from 'objection';

/** Which page a client asked for: `page` from 1, `pageSize` rows each. */
export interface PageRequest {
  page: number;
  pageSize: number;
}

/** What every list answers. */
export interface Page<T> extends PageRequest {
  items: T[];
  /** Rows matching the filter, on every page. */
  total: number;
}

/** The rows a page skips. */
export const pageOffset = (request: PageRequest): number => (request.page - 1) * request.pageSize;

/** Limits an ordered query (knex or objection) to the page asked for. */
export function onePage<Q extends { limit(n: number): Q; offset(n: number): Q }>(query: Q, request: PageRequest): Q {
  return query.limit(request.pageSize).offset(pageOffset(request));
}

/** A list's answer: the page's items, the request's page and size, and the filter's total. */
export function pageOf<T>(items: T[], request: PageRequest, total: number): Page<T> {
  return { items, page: request.page, pageSize: request.pageSize, total };
}

/** The number a `count(...)` row holds (PostgreSQL answers a bigint as a string). */
export const countOf = (row: Record<string, unknown> | undefined): number => Number(Object.values(row ?? {})[0] ?? 0);

/**
 * One page of a filtered objection query, newest first (createdAt, then id, both descending), with the
 * filter's total: `filtered` builds the same filtered query twice, once for the rows and once for the count.
 */
export async function newestFirstPage<M extends Model>(filtered: () => QueryBuilder<M>, request: PageRequest): Promise<{ rows: M[]; total: number }> {
  const [rows, total] = await Promise.all([
    onePage(
      filtered().orderBy([
        { column: 'createdAt', order: 'desc' },
        { column: 'id', order: 'desc' },
      ]),
      request,
    ),
    filtered().resultSize(),
  ]);
  return { rows, total };
}
