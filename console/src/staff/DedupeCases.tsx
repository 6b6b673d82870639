/**
 * Duplicate identities, for administrators (docs/dedupe.md): the cases links opened, one case with the
 * new live capture beside both accounts' masked details, score and band, and the decision with a note.
 * The capture is fetched with the administrator's token and shown from a blob URL (never cached).
 */
import { useEffect, useState } from 'preact/hooks';
import type { paths } from '../api/client.js';
import type { Session } from '../session.js';
import { Note, fmtDate, fmtScore } from '../ui/common.js';
import { ErrorNote, SelectField, asOptions } from '../ui/forms.js';
import { PagedTable, usePagedList } from '../ui/lists.js';
import { problem } from './staff-common.js';

type CaseDetail = paths['/dedupe/cases/{id}']['get']['responses'][200]['content']['application/json'];
type CaseItem = paths['/dedupe/cases']['get']['responses'][200]['content']['application/json']['items'][number];
type Account = CaseDetail['accounts']['user'];
type Status = '' | CaseItem['status'];
type Kind = '' | CaseItem['kind'];

const BAND: Record<CaseItem['kind'], string> = {
  duplicate: 'Duplicate (at or above DEDUPE_THRESHOLD)',
  possible_duplicate: 'Possible duplicate (review band)',
  watchlist: 'Watch-list match',
};

function AccountCard(props: { title: string; account: Account | null; testid: string }) {
  const a = props.account;
  return (
    <article data-testid={props.testid}>
      <h3>{props.title}</h3>
      {!a ? (
        <p>—</p>
      ) : (
        <dl>
          <dt>Name</dt>
          <dd>{a.name ?? '—'}</dd>
          <dt>Phone</dt>
          <dd>{a.phone ?? '—'}</dd>
          <dt>NIN</dt>
          <dd>
            {a.nin ?? '—'}
            {a.ninLinkedAt && <small> linked {fmtDate(a.ninLinkedAt)}</small>}
          </dd>
          <dt>BVN</dt>
          <dd>
            {a.bvn ?? '—'}
            {a.bvnLinkedAt && <small> linked {fmtDate(a.bvnLinkedAt)}</small>}
          </dd>
          {a.deleted && (
            <>
              <dt>Account</dt>
              <dd>deleted</dd>
            </>
          )}
        </dl>
      )}
    </article>
  );
}

export function DedupeCases(props: { session: Session }) {
  const api = props.session.api;
  const [status, setStatus] = useState<Status>('open');
  const [kind, setKind] = useState<Kind>('');
  const { list, setPage, load } = usePagedList(
    async (page) =>
      (await api.GET('/dedupe/cases', { params: { query: { page, pageSize: 10, ...(status ? { status } : {}), ...(kind ? { kind } : {}) } } })).data,
    [status, kind],
  );
  const [detail, setDetail] = useState<CaseDetail | null>(null);
  const [capture, setCapture] = useState<string | null>(null);
  const [note, setNote] = useState('');
  const [error, setError] = useState<string | null>(null);

  useEffect(
    () => () => {
      if (capture) URL.revokeObjectURL(capture);
    },
    [capture],
  );

  const open = async (id: string) => {
    setError(null);
    setNote('');
    const { data, error: err } = await api.GET('/dedupe/cases/{id}', { params: { path: { id } } });
    if (!data) return setError(problem(err));
    setDetail(data);
    setCapture(null);
    if (data.case.captureAvailable) {
      const { data: blob } = await api.GET('/dedupe/cases/{id}/capture', { params: { path: { id } }, parseAs: 'blob' });
      if (blob) setCapture(URL.createObjectURL(blob as Blob));
    }
  };

  const decide = async (to: 'confirmed' | 'dismissed') => {
    if (!detail) return;
    setError(null);
    const { data, error: err } = await api.PATCH('/dedupe/cases/{id}', {
      params: { path: { id: detail.case.id } },
      body: { status: to, ...(note.trim() ? { note } : {}) },
    });
    if (!data) return setError(problem(err));
    setDetail({ ...detail, case: data.case });
    await load();
  };

  const c = detail?.case;
  return (
    <div class="grid-2">
      <section>
        <h1>Duplicate identities</h1>
        <p>Cases opened when a face being linked was already enrolled under another account, or is on the watch-list. The consumer is never told.</p>
        <div class="row">
          <SelectField<Status>
            label="Status"
            inline
            name="caseStatus"
            value={status}
            options={[['', 'Any'], ...asOptions(['open', 'confirmed', 'dismissed'] as const)]}
            onValue={(s) => {
              setPage(1);
              setStatus(s);
            }}
          />
          <SelectField<Kind>
            label="Kind"
            inline
            name="caseKind"
            value={kind}
            options={[['', 'Any'], ...asOptions(['duplicate', 'possible_duplicate', 'watchlist'] as const)]}
            onValue={(k) => {
              setPage(1);
              setKind(k);
            }}
          />
        </div>
        <PagedTable
          list={list}
          onPage={setPage}
          empty="No cases."
          testid="dedupe-cases"
          columns={['Opened', 'Kind', 'Score', 'Status']}
          row={(x: CaseItem) => (
            <tr class={c?.id === x.id ? 'selected' : ''}>
              <td>
                <button type="button" class="link" onClick={() => void open(x.id)}>
                  {fmtDate(x.createdAt)}
                </button>
              </td>
              <td>
                {x.kind}
                {x.blocked && <small> (link refused)</small>}
              </td>
              <td>{fmtScore(x.score)}</td>
              <td>
                <span class="badge">{x.status}</span>
              </td>
            </tr>
          )}
        />
      </section>
      <section data-testid="dedupe-case">
        {!c || !detail ? (
          <p>Pick a case to review it.</p>
        ) : (
          <>
            <h2>{BAND[c.kind]}</h2>
            <p>
              Score <strong data-testid="case-score">{fmtScore(c.score)}</strong> · {c.registry.toUpperCase()} link · opened {fmtDate(c.createdAt)}
              {c.blocked ? ' · the link was refused' : ''}
            </p>
            <figure>
              {capture ? (
                <img src={capture} alt="The live capture taken at link" width={200} data-testid="case-capture" />
              ) : (
                <p>
                  <small>No capture kept for this case.</small>
                </p>
              )}
              <figcaption>New live capture</figcaption>
            </figure>
            <div class="grid-2">
              <AccountCard title="Account being linked" account={detail.accounts.user} testid="case-user" />
              {c.kind === 'watchlist' ? (
                <article data-testid="case-watchlist">
                  <h3>Watch-list entry</h3>
                  <p>{detail.watchlistReason ?? 'removed since'}</p>
                </article>
              ) : (
                <AccountCard title="Account already enrolled" account={detail.accounts.matchedUser} testid="case-matched-user" />
              )}
            </div>
            <ErrorNote error={error} />
            {c.status === 'open' ? (
              <form onSubmit={(e) => e.preventDefault()}>
                <label>
                  Note
                  <textarea name="note" maxLength={2000} value={note} onInput={(e) => setNote(e.currentTarget.value)} />
                </label>
                <div class="row">
                  <button type="button" onClick={() => void decide('confirmed')}>
                    Confirm: same person
                  </button>
                  <button type="button" class="secondary" onClick={() => void decide('dismissed')}>
                    Dismiss
                  </button>
                </div>
              </form>
            ) : (
              <Note kind="info" testid="case-decision">
                {c.status} {c.decidedAt ? fmtDate(c.decidedAt) : ''}
                {c.note ? `: ${c.note}` : ''}
              </Note>
            )}
          </>
        )}
      </section>
    </div>
  );
}
