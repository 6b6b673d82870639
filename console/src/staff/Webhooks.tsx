/**
 * Webhooks, for administrators (docs/webhooks.md): register an endpoint and pick its event types (the
 * signing secret is shown once), disable or re-enable it, rotate its secret, read its delivery log and
 * replay an event from it.
 */
import { useState } from 'preact/hooks';
import type { paths } from '../api/client.js';
import type { Session } from '../session.js';
import { Note, fmtDate } from '../ui/common.js';
import { ErrorNote, Field } from '../ui/forms.js';
import { PagedTable, usePagedList } from '../ui/lists.js';
import { problem } from './staff-common.js';

type EventType = paths['/webhooks/endpoints']['post']['requestBody']['content']['application/json']['events'][number];
type Endpoint = paths['/webhooks/endpoints/{id}']['get']['responses'][200]['content']['application/json']['endpoint'];
type Attempt = paths['/webhooks/endpoints/{id}/deliveries']['get']['responses'][200]['content']['application/json']['items'][number];

/** Every event type, as the API declares them (a missing or unknown one fails the console's typecheck). */
const EVENT_TYPES: { type: EventType; label: string }[] = [
  { type: 'user.bank_account.updated', label: 'A pending bank-account change landed' },
  { type: 'user.deleted', label: 'A user deleted their account' },
  { type: 'dispute.created', label: 'A dispute was opened' },
  { type: 'dispute.updated', label: 'A dispute moved' },
  { type: 'identify.escalated', label: 'An identification was escalated' },
  { type: 'operator.deactivated', label: 'An operator was deactivated' },
  { type: 'dedupe.case.opened', label: 'A duplicate-identity case was opened' },
  { type: 'dedupe.case.decided', label: 'A duplicate-identity case was decided' },
];

export function Webhooks(props: { session: Session }) {
  const api = props.session.api;
  const { list, setPage, load } = usePagedList(async (page) => (await api.GET('/webhooks/endpoints', { params: { query: { page, pageSize: 10 } } })).data);
  const [selected, setSelected] = useState<Endpoint | null>(null);
  const [secret, setSecret] = useState<{ url: string; secret: string; rotated: boolean } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [draft, setDraft] = useState<{ url: string; description: string; events: EventType[] }>({ url: '', description: '', events: [] });

  const select = async (id: string) => {
    const { data } = await api.GET('/webhooks/endpoints/{id}', { params: { path: { id } } });
    if (data) setSelected(data.endpoint);
    await load();
  };

  const create = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setSecret(null);
    if (draft.events.length === 0) return setError('Pick at least one event type.');
    const { data, error: err } = await api.POST('/webhooks/endpoints', {
      body: { url: draft.url, events: draft.events, ...(draft.description.trim() ? { description: draft.description } : {}) },
    });
    if (!data) return setError(problem(err));
    setSecret({ url: data.endpoint.url, secret: data.secret, rotated: false });
    setDraft({ url: '', description: '', events: [] });
    setSelected(data.endpoint);
    await load();
  };

  const toggle = (type: EventType) =>
    setDraft({ ...draft, events: draft.events.includes(type) ? draft.events.filter((t) => t !== type) : [...draft.events, type] });

  return (
    <div class="grid-2">
      <section>
        <h1>Webhooks</h1>
        <p>Events pushed to the bank's systems, signed (Standard Webhooks) and retried for about a day. Payloads carry ids and statuses only.</p>
        <PagedTable
          list={list}
          onPage={setPage}
          empty="No endpoints yet."
          testid="webhook-endpoints"
          columns={['URL', 'Events', 'Status']}
          row={(w) => (
            <tr class={selected?.id === w.id ? 'selected' : ''}>
              <td>
                <button type="button" class="link" onClick={() => void select(w.id)}>
                  {w.url}
                </button>
                {w.description && <small> {w.description}</small>}
              </td>
              <td>
                <small>{w.events.join(', ')}</small>
              </td>
              <td>
                <span class={w.status === 'active' ? 'badge ok' : 'badge warn'}>{w.status}</span>
                {w.disabledReason === 'gone' && <span class="badge warn">410 gone</span>}
              </td>
            </tr>
          )}
        />
        <article>
          <h2>New endpoint</h2>
          <form onSubmit={create} data-testid="new-webhook">
            <Field
              label="URL"
              name="webhookUrl"
              type="url"
              required
              placeholder="https://bank.example/hooks/faceid"
              value={draft.url}
              onValue={(url) => setDraft({ ...draft, url })}
            />
            <Field
              label="Description"
              name="webhookDescription"
              maxLength={500}
              value={draft.description}
              onValue={(description) => setDraft({ ...draft, description })}
            />
            <fieldset>
              <legend>Event types</legend>
              {EVENT_TYPES.map((t) => (
                <label>
                  <input type="checkbox" name={`event-${t.type}`} checked={draft.events.includes(t.type)} onChange={() => toggle(t.type)} />{' '}
                  <code>{t.type}</code> <small>{t.label}</small>
                </label>
              ))}
            </fieldset>
            <button type="submit">Create endpoint</button>
          </form>
        </article>
      </section>
      <section>
        {secret && (
          <article class="secret" data-testid="webhook-secret">
            <h2>
              {secret.rotated ? 'New signing secret' : 'Signing secret'} for {secret.url}
            </h2>
            <p>
              Shown once. Give it to the receiver's owners over a safe channel; it verifies the <code>webhook-signature</code> header.
              {secret.rotated && ' The previous secret keeps signing during the overlap, so the receiver can switch at any time in it.'}
            </p>
            <p>
              <code data-testid="webhook-secret-value">{secret.secret}</code>
            </p>
          </article>
        )}
        <ErrorNote error={error} />
        {selected && (
          <EndpointDetail
            session={props.session}
            endpoint={selected}
            onChanged={async (id) => (id ? select(id) : (setSelected(null), load()))}
            onSecret={(s) => setSecret({ url: selected.url, secret: s, rotated: true })}
            onError={setError}
          />
        )}
      </section>
    </div>
  );
}

function EndpointDetail(props: {
  session: Session;
  endpoint: Endpoint;
  onChanged: (id: string | null) => Promise<void>;
  onSecret: (secret: string) => void;
  onError: (message: string | null) => void;
}) {
  const api = props.session.api;
  const w = props.endpoint;
  const path = { params: { path: { id: w.id } } };
  const [note, setNote] = useState<string | null>(null);
  // Reloaded whenever the endpoint is read again (selecting it in the list refreshes its log).
  const {
    list: log,
    setPage,
    load: loadLog,
  } = usePagedList(
    async (page) => (await api.GET('/webhooks/endpoints/{id}/deliveries', { params: { path: { id: w.id }, query: { page, pageSize: 10 } } })).data,
    [w],
  );

  const run = async (what: 'disable' | 'enable' | 'rotate' | 'delete') => {
    props.onError(null);
    setNote(null);
    if (what === 'rotate') {
      const { data, error } = await api.POST('/webhooks/endpoints/{id}/rotate-secret', path);
      if (!data) return props.onError(problem(error));
      props.onSecret(data.secret);
      return props.onChanged(w.id);
    }
    if (what === 'delete') {
      if (!window.confirm(`Delete ${w.url} with its delivery log?`)) return;
      const { error, response } = await api.DELETE('/webhooks/endpoints/{id}', path);
      if (!response.ok) return props.onError(problem(error));
      return props.onChanged(null);
    }
    const { data, error } = await api.PATCH('/webhooks/endpoints/{id}', { ...path, body: { status: what === 'disable' ? 'disabled' : 'active' } });
    if (!data) return props.onError(problem(error));
    return props.onChanged(w.id);
  };

  const replay = async (eventId: string) => {
    props.onError(null);
    const { data, error } = await api.POST('/webhooks/events/{eventId}/replay', { params: { path: { eventId } } });
    if (!data) return props.onError(problem(error));
    setNote(`Event ${eventId.slice(0, 8)} queued again for ${data.deliveries} endpoint${data.deliveries === 1 ? '' : 's'}.`);
    setTimeout(() => void loadLog(), 1500);
  };

  return (
    <article data-testid="webhook-detail">
      <h2>{w.url}</h2>
      <p>
        <span class={w.status === 'active' ? 'badge ok' : 'badge warn'} data-testid="webhook-status">
          {w.status}
        </span>
        {w.disabledReason === 'gone' && <span class="badge warn">the receiver answered 410 Gone</span>}
        {w.previousSecretExpiresAt && <span class="badge">previous secret signs until {fmtDate(w.previousSecretExpiresAt)}</span>}{' '}
        <small>created {fmtDate(w.createdAt)}</small>
      </p>
      <p>
        <small>{w.events.join(', ')}</small>
      </p>
      <div class="row wrap">
        {w.status === 'active' ? (
          <button type="button" class="secondary" onClick={() => void run('disable')}>
            Disable
          </button>
        ) : (
          <button type="button" class="secondary" onClick={() => void run('enable')}>
            Enable
          </button>
        )}
        <button type="button" class="secondary" onClick={() => void run('rotate')}>
          Rotate secret
        </button>
        <button type="button" class="danger" onClick={() => void run('delete')}>
          Delete
        </button>
      </div>
      {note && <Note kind="ok">{note}</Note>}
      <h3>
        Delivery log{' '}
        <button type="button" class="secondary small" onClick={() => void loadLog()}>
          Refresh
        </button>
      </h3>
      {!log ? (
        <p>No attempts yet.</p>
      ) : (
        <PagedTable
          list={log}
          onPage={setPage}
          empty="No attempts yet."
          testid="webhook-deliveries"
          columns={['Event', 'Attempt', <span class="visually-hidden">Replay</span>]}
          row={(a: Attempt) => (
            <tr>
              <td>
                <code>{a.eventType}</code>
                <br />
                <small>
                  {a.eventId.slice(0, 8)} · {fmtDate(a.createdAt)}
                </small>
              </td>
              <td>
                #{a.attempt} <span class={a.status === 'succeeded' ? 'badge ok' : a.status === 'failed' ? 'badge warn' : 'badge'}>{a.status}</span>{' '}
                <small>{a.responseStatus ?? a.error ?? ''}</small>
              </td>
              <td>
                <button type="button" class="secondary small" onClick={() => void replay(a.eventId)}>
                  Replay
                </button>
              </td>
            </tr>
          )}
        />
      )}
    </article>
  );
}
