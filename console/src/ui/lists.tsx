/** Lists shared by the consoles: a page of rows loaded from the API, a table with its header, the two with a pager. */
import { useEffect, useState } from 'preact/hooks';
import type { ComponentChildren } from 'preact';
import { Pager } from './common.js';

/** One page of a paged API answer (`GET /operators`, `/disputes`, `/audit-events`, …). */
export interface Paged<T> {
  items: T[];
  page: number;
  pageSize: number;
  total: number;
}

export type PagerLabels = { prev: string; next: string; of: (a: number, b: number) => string };

/** The staff pages' pager texts (staff pages are English). */
export const staffPagerLabels: PagerLabels = { prev: 'Previous', next: 'Next', of: (a, b) => `Page ${a} of ${b}` };

/**
 * A paged list: the page number, the page last loaded and `load` (which reads the current page with the
 * caller's current filters). It loads again when the page or any of `deps` changes; a failed read keeps
 * the page shown before. `fetchPage` answers `undefined` on an error.
 */
export function usePagedList<T>(fetchPage: (page: number) => Promise<Paged<T> | undefined>, deps: readonly unknown[] = []) {
  const [page, setPage] = useState(1);
  const [list, setList] = useState<Paged<T> | null>(null);
  const load = async () => {
    const data = await fetchPage(page);
    if (data) setList(data);
  };
  useEffect(() => void load(), [page, ...deps]);
  return { page, setPage, list, load };
}

/** A table in its scrolling wrapper, with a header row of column headings (`scope="col"`). */
export function Table(props: { columns: readonly ComponentChildren[]; testid?: string; children: ComponentChildren }) {
  return (
    <div class="table-wrap">
      <table data-testid={props.testid}>
        <thead>
          <tr>
            {props.columns.map((c) => (
              <th scope="col">{c}</th>
            ))}
          </tr>
        </thead>
        <tbody>{props.children}</tbody>
      </table>
    </div>
  );
}

/**
 * A page of rows as a table with its pager below. Nothing while the first page is loading; `empty`, when
 * given, is said instead of an empty table.
 */
export function PagedTable<T>(props: {
  list: Paged<T> | null;
  onPage: (page: number) => void;
  columns: readonly ComponentChildren[];
  row: (item: T) => ComponentChildren;
  labels?: PagerLabels;
  testid?: string;
  empty?: ComponentChildren;
}) {
  const list = props.list;
  if (!list) return null;
  if (props.empty !== undefined && list.items.length === 0) return <p>{props.empty}</p>;
  return (
    <>
      <Table columns={props.columns} testid={props.testid}>
        {list.items.map(props.row)}
      </Table>
      <Pager page={list.page} pageSize={list.pageSize} total={list.total} onPage={props.onPage} labels={props.labels ?? staffPagerLabels} />
    </>
  );
}
