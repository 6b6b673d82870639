/** A page of /identify searches (SearchLog rows): the desk's own past searches and, for administrators, an operator's. */
import { fmtDate, fmtScore } from '../ui/common.js';
import { PagedTable, type Paged } from '../ui/lists.js';

export type SearchLogRow = { id: string; outcome: string; topScore: number | null; escalatedAt: string | null; createdAt: string };

export function SearchLogTable(props: { list: Paged<SearchLogRow>; onPage: (page: number) => void; empty: string; testid?: string }) {
  return (
    <PagedTable
      list={props.list}
      onPage={props.onPage}
      empty={props.empty}
      testid={props.testid}
      columns={['When', 'Outcome', 'Top score', 'Escalated']}
      row={(s) => (
        <tr>
          <td>{fmtDate(s.createdAt)}</td>
          <td>{s.outcome}</td>
          <td>{fmtScore(s.topScore)}</td>
          <td>{s.escalatedAt ? fmtDate(s.escalatedAt) : '—'}</td>
        </tr>
      )}
    />
  );
}
