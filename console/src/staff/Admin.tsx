/** The administrator's office: operators, disputes, analytics and billing, audit events, webhooks, the queue dashboard. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, Tooltip } from 'chart.js';
import type { Session } from '../session.js';
import { fmtDate } from '../ui/common.js';
import { ErrorNote, Field, FilterBar, FilterInput, SelectField, asOptions } from '../ui/forms.js';
import { PagedTable, usePagedList } from '../ui/lists.js';
import { problem, type StaffIdentity } from './staff-common.js';
import { Webhooks } from './Webhooks.js';
import { DedupeCases } from './DedupeCases.js';
import { SearchLogTable } from './SearchLogTable.js';

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Tooltip, Legend);

type Section = 'operators' | 'disputes' | 'dedupe' | 'analytics' | 'audit' | 'webhooks' | 'queues';

export function AdminOffice(props: { session: Session; me: StaffIdentity }) {
  const [section, setSection] = useState<Section>('operators');
  const labels: Record<Section, string> = {
    operators: 'Operators',
    disputes: 'Disputes',
    dedupe: 'Duplicate identities',
    analytics: 'Analytics & billing',
    audit: 'Audit events',
    webhooks: 'Webhooks',
    queues: 'Queues',
  };
  return (
    <>
      <nav class="subnav" aria-label="Office">
        {(Object.keys(labels) as Section[]).map((s) => (
          <button
            type="button"
            class={section === s ? 'contrast' : 'secondary outline'}
            aria-current={section === s ? 'page' : undefined}
            onClick={() => setSection(s)}
          >
            {labels[s]}
          </button>
        ))}
      </nav>
      {section === 'operators' && <Operators session={props.session} me={props.me} />}
      {section === 'disputes' && <Disputes session={props.session} />}
      {section === 'dedupe' && <DedupeCases session={props.session} />}
      {section === 'analytics' && <Analytics session={props.session} />}
      {section === 'audit' && <Audit session={props.session} />}
      {section === 'webhooks' && <Webhooks session={props.session} />}
      {section === 'queues' && <Queues session={props.session} />}
    </>
  );
}

type Operator = {
  id: string;
  identifier: string;
  displayName: string;
  role: 'operator' | 'administrator';
  status: 'active' | 'deactivated';
  mustResetPassword: boolean;
  locked: boolean;
  mfaEnabled?: boolean;
  orgId: string;
  createdAt: string;
};

function Operators(props: { session: Session; me: StaffIdentity }) {
  const api = props.session.api;
  const [filter, setFilter] = useState<{ q: string; role: '' | 'operator' | 'administrator'; status: '' | 'active' | 'deactivated' }>({
    q: '',
    role: '',
    status: '',
  });
  const [selected, setSelected] = useState<Operator | null>(null);
  const [secret, setSecret] = useState<{ identifier: string; password: string } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [draft, setDraft] = useState<{ identifier: string; displayName: string; role: 'operator' | 'administrator' }>({
    identifier: '',
    displayName: '',
    role: 'operator',
  });

  const { list, setPage, load } = usePagedList<Operator>(
    async (page) =>
      (
        await api.GET('/operators', {
          params: {
            query: {
              page,
              pageSize: 10,
              ...(filter.q ? { q: filter.q } : {}),
              ...(filter.role ? { role: filter.role } : {}),
              ...(filter.status ? { status: filter.status } : {}),
            },
          },
        })
      ).data,
    [filter.role, filter.status],
  );

  const refreshSelected = async (id: string) => {
    const { data } = await api.GET('/operators/{id}', { params: { path: { id } } });
    if (data) setSelected(data.operator);
    await load();
  };

  const create = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const { data, error: err } = await api.POST('/operators', { body: draft });
    if (!data) return setError(problem(err));
    setSecret({ identifier: data.operator.identifier, password: data.temporaryPassword });
    setDraft({ identifier: '', displayName: '', role: 'operator' });
    setSelected(data.operator);
    await load();
  };

  const act = async (what: 'reset' | 'reset-mfa' | 'deactivate' | 'activate' | 'role') => {
    if (!selected) return;
    setError(null);
    setSecret(null);
    const id = selected.id;
    const path = { params: { path: { id } } };
    const { data, error: err } =
      what === 'reset'
        ? await api.POST('/operators/{id}/reset-password', path)
        : what === 'reset-mfa'
          ? await api.POST('/operators/{id}/reset-mfa', path)
          : what === 'deactivate'
            ? await api.DELETE('/operators/{id}', path)
            : what === 'activate'
              ? await api.PATCH('/operators/{id}', { ...path, body: { status: 'active' } })
              : await api.PATCH('/operators/{id}', { ...path, body: { role: selected.role === 'operator' ? 'administrator' : 'operator' } });
    if (!data) return setError(problem(err));
    if ('temporaryPassword' in data) setSecret({ identifier: selected.identifier, password: data.temporaryPassword });
    await refreshSelected(id);
  };

  return (
    <div class="grid-2">
      <section>
        <h1>Operators</h1>
        <FilterBar
          submit="Search"
          onSubmit={() => {
            setPage(1);
            void load();
          }}
        >
          <FilterInput
            type="search"
            name="q"
            label="Search identifier or name"
            placeholder="Identifier or name"
            value={filter.q}
            onValue={(q) => setFilter({ ...filter, q })}
          />
          <SelectField
            name="role"
            label="Role"
            hiddenLabel
            value={filter.role}
            options={[
              ['', 'Any role'],
              ['operator', 'Operator'],
              ['administrator', 'Administrator'],
            ]}
            onValue={(role) => {
              setPage(1);
              setFilter({ ...filter, role });
            }}
          />
          <SelectField
            name="status"
            label="Status"
            hiddenLabel
            value={filter.status}
            options={[
              ['', 'Any status'],
              ['active', 'Active'],
              ['deactivated', 'Deactivated'],
            ]}
            onValue={(status) => {
              setPage(1);
              setFilter({ ...filter, status });
            }}
          />
        </FilterBar>
        <PagedTable
          list={list}
          onPage={setPage}
          testid="operators"
          columns={['Identifier', 'Name', 'Role', 'Status']}
          row={(o) => (
            <tr class={selected?.id === o.id ? 'selected' : ''}>
              <td>
                <button type="button" class="link" onClick={() => void refreshSelected(o.id)}>
                  {o.identifier}
                </button>
              </td>
              <td>{o.displayName}</td>
              <td>{o.role}</td>
              <td>
                <span class={o.status === 'active' ? 'badge ok' : 'badge warn'}>{o.status}</span>
                {o.mustResetPassword && <span class="badge">password to set</span>}
                {o.locked && <span class="badge warn">locked</span>}
              </td>
            </tr>
          )}
        />
      </section>
      <section>
        {secret && (
          <article class="secret" data-testid="temporary-password">
            <h2>Temporary password for {secret.identifier}</h2>
            <p>Shown once. Hand it over in person; it must be changed at the first sign-in.</p>
            <p>
              <code data-testid="temporary-password-value">{secret.password}</code>
            </p>
          </article>
        )}
        <ErrorNote error={error} />
        {selected && <OperatorDetail session={props.session} operator={selected} self={selected.id === props.me.operatorId} act={act} />}
        <article>
          <h2>New operator</h2>
          <form onSubmit={create}>
            <Field
              label="Identifier"
              name="newIdentifier"
              required
              pattern="[A-Za-z0-9][A-Za-z0-9._@+\-]{2,63}"
              value={draft.identifier}
              onValue={(identifier) => setDraft({ ...draft, identifier })}
            />
            <Field
              label="Display name"
              name="newDisplayName"
              required
              value={draft.displayName}
              onValue={(displayName) => setDraft({ ...draft, displayName })}
            />
            <SelectField
              label="Role"
              name="newRole"
              value={draft.role}
              options={[
                ['operator', 'Operator'],
                ['administrator', 'Administrator'],
              ]}
              onValue={(role) => setDraft({ ...draft, role })}
            />
            <button type="submit">Create operator</button>
          </form>
        </article>
      </section>
    </div>
  );
}

function OperatorDetail(props: {
  session: Session;
  operator: Operator;
  self: boolean;
  act: (what: 'reset' | 'reset-mfa' | 'deactivate' | 'activate' | 'role') => Promise<void>;
}) {
  const o = props.operator;
  const { list: sessions, setPage } = usePagedList(
    async (page) => (await props.session.api.GET('/operators/{id}/sessions', { params: { path: { id: o.id }, query: { page, pageSize: 5 } } })).data,
    [o.id],
  );
  return (
    <article data-testid="operator-detail">
      <h2>
        {o.displayName} <small>({o.identifier})</small>
      </h2>
      <p>
        <span class="badge">{o.role}</span>{' '}
        <span class={o.status === 'active' ? 'badge ok' : 'badge warn'} data-testid="operator-status">
          {o.status}
        </span>
        {o.mustResetPassword && (
          <span class="badge" data-testid="must-reset">
            must set a password
          </span>
        )}
        {o.mfaEnabled && (
          <span class="badge ok" data-testid="mfa-enabled">
            two-step sign-in on
          </span>
        )}{' '}
        <small>created {fmtDate(o.createdAt)}</small>
      </p>
      <div class="row wrap">
        <button type="button" class="secondary" onClick={() => void props.act('reset')}>
          Reset password
        </button>
        {o.mfaEnabled && (
          <button type="button" class="secondary" onClick={() => void props.act('reset-mfa')}>
            Reset two-step sign-in
          </button>
        )}
        <button type="button" class="secondary" disabled={props.self} onClick={() => void props.act('role')}>
          Make {o.role === 'operator' ? 'administrator' : 'operator'}
        </button>
        {o.status === 'active' ? (
          <button type="button" class="danger" disabled={props.self} onClick={() => void props.act('deactivate')}>
            Deactivate
          </button>
        ) : (
          <button type="button" class="secondary" onClick={() => void props.act('activate')}>
            Reactivate
          </button>
        )}
      </div>
      <h3>Searches</h3>
      {!sessions ? <p>No searches.</p> : <SearchLogTable list={sessions} onPage={setPage} empty="No searches." />}
    </article>
  );
}

const DISPUTE_STATUSES = ['open', 'investigating', 'resolved', 'rejected'] as const;
type DisputeStatus = (typeof DISPUTE_STATUSES)[number];
const NEXT: Record<DisputeStatus, DisputeStatus[]> = { open: ['investigating'], investigating: ['resolved', 'rejected'], resolved: [], rejected: [] };

function Disputes(props: { session: Session }) {
  const api = props.session.api;
  const [status, setStatus] = useState<'' | DisputeStatus>('');
  const { list, setPage, load } = usePagedList(
    async (page) => (await api.GET('/disputes', { params: { query: { page, pageSize: 10, ...(status ? { status } : {}) } } })).data,
    [status],
  );
  const [error, setError] = useState<string | null>(null);
  const move = async (id: string, to: DisputeStatus) => {
    setError(null);
    const { error: err } = await api.PATCH('/disputes/{id}', { params: { path: { id } }, body: { status: to } });
    if (err) setError(problem(err));
    await load();
  };
  return (
    <section>
      <h1>Disputes</h1>
      <SelectField
        label="Status"
        inline
        name="disputeStatus"
        value={status}
        options={[['', 'Any'], ...asOptions(DISPUTE_STATUSES)]}
        onValue={(s) => {
          setPage(1);
          setStatus(s);
        }}
      />
      <ErrorNote error={error} />
      <PagedTable
        list={list}
        onPage={setPage}
        empty="No disputes."
        testid="disputes"
        columns={['Opened', 'Kind', 'Reason', 'Status', 'Move to']}
        row={(d) => (
          <tr>
            <td>{fmtDate(d.createdAt)}</td>
            <td>{d.kind}</td>
            <td>{d.reason ?? '—'}</td>
            <td>
              <span class="badge" data-testid="dispute-status">
                {d.status}
              </span>
            </td>
            <td>
              <div class="row">
                {NEXT[d.status].length === 0 ? (
                  <small>final</small>
                ) : (
                  NEXT[d.status].map((to) => (
                    <button type="button" class="secondary small" onClick={() => void move(d.id, to)}>
                      {to}
                    </button>
                  ))
                )}
              </div>
            </td>
          </tr>
        )}
      />
    </section>
  );
}

function BarChart(props: {
  label: string;
  labels: string[];
  datasets: { label: string; data: number[]; color: string }[];
  stacked?: boolean;
  percent?: boolean;
}) {
  const canvas = useRef<HTMLCanvasElement>(null);
  useEffect(() => {
    if (!canvas.current) return;
    const chart = new Chart(canvas.current, {
      type: 'bar',
      data: { labels: props.labels, datasets: props.datasets.map((d) => ({ label: d.label, data: d.data, backgroundColor: d.color, maxBarThickness: 56 })) },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: {
          x: { stacked: props.stacked },
          y: {
            stacked: props.stacked,
            beginAtZero: true,
            ...(props.percent ? { max: 100, ticks: { callback: (v) => `${v}%` } } : { ticks: { precision: 0 } }),
          },
        },
      },
    });
    return () => chart.destroy();
  }, [JSON.stringify(props.labels), JSON.stringify(props.datasets)]);
  return (
    <div class="chart">
      <canvas ref={canvas} role="img" aria-label={props.label} />
    </div>
  );
}

const COLORS: Record<string, string> = {
  match: '#2e7d32',
  no_match: '#5c6bc0',
  liveness_failed: '#ef6c00',
  no_face: '#8d6e63',
  identify: '#1565c0',
  verify_self: '#00897b',
};
const colorOf = (k: string) => COLORS[k] ?? '#757575';

function Analytics(props: { session: Session }) {
  const api = props.session.api;
  const [range, setRange] = useState({ from: '', to: '' });
  type Volume = {
    days: { date: string; identify: { total: number }; verify_self: { total: number } }[];
    totals: { identify: number; verify_self: number; total: number };
  };
  type Accuracy = {
    label: string;
    disputedMatchRate: number | null;
    endpoints: Record<
      'identify' | 'verify_self',
      { total: number; outcomes: Record<string, { count: number; rate: number | null }>; disputedMatchRate: number | null }
    >;
  };
  const [volume, setVolume] = useState<Volume | null>(null);
  const [accuracy, setAccuracy] = useState<Accuracy | null>(null);
  const [billing, setBilling] = useState<{
    orgId: string;
    tier: { name: string };
    currency: string;
    includedVolume: number;
    usage: { billable: number; definition: string };
    overage: { volume: number; amount: number };
    amountDue: number;
  } | null>(null);
  const [orgId, setOrgId] = useState('default');
  const [error, setError] = useState<string | null>(null);

  const load = async () => {
    setError(null);
    const query = { ...(range.from ? { from: range.from } : {}), ...(range.to ? { to: range.to } : {}) };
    const [v, a, b] = await Promise.all([
      api.GET('/analytics/volume', { params: { query } }),
      api.GET('/analytics/accuracy', { params: { query } }),
      api.GET('/billing/{orgId}', { params: { path: { orgId }, query } as never }),
    ]);
    if (v.error || a.error) setError(problem(v.error ?? a.error));
    setVolume((v.data as Volume | undefined) ?? null);
    setAccuracy((a.data as Accuracy | undefined) ?? null);
    setBilling((b.data as typeof billing | undefined) ?? null);
    if (b.error) setError(problem(b.error));
  };
  useEffect(() => void load(), []);

  const outcomes = accuracy
    ? [...new Set([...Object.keys(accuracy.endpoints.identify.outcomes), ...Object.keys(accuracy.endpoints.verify_self.outcomes)])]
    : [];
  const pct = (r: number | null | undefined) => (typeof r === 'number' ? Math.round(r * 1000) / 10 : 0);

  return (
    <section>
      <h1>Analytics &amp; billing</h1>
      <FilterBar submit="Show" onSubmit={() => void load()}>
        <Field label="From" type="date" name="from" value={range.from} onValue={(from) => setRange({ ...range, from })} />
        <Field label="To" type="date" name="to" value={range.to} onValue={(to) => setRange({ ...range, to })} />
        <Field label="Organisation" name="orgId" value={orgId} onValue={setOrgId} />
      </FilterBar>
      <ErrorNote error={error} />
      <div class="grid-2">
        <article>
          <h2>Volume per day</h2>
          {volume && (
            <>
              <BarChart
                label="Bar chart: identifications and self-verifications per day"
                stacked
                labels={volume.days.map((d) => d.date)}
                datasets={[
                  { label: 'Identify (1:N)', data: volume.days.map((d) => d.identify.total), color: colorOf('identify') },
                  { label: 'Verify self (1:1)', data: volume.days.map((d) => d.verify_self.total), color: colorOf('verify_self') },
                ]}
              />
              <p data-testid="volume-totals">
                Total {volume.totals.total}: {volume.totals.identify} identifications, {volume.totals.verify_self} self-verifications.
              </p>
            </>
          )}
        </article>
        <article>
          <h2>
            Outcome rates <small class="badge warn">proxies</small>
          </h2>
          {accuracy && (
            <>
              <BarChart
                label="Bar chart: share of each outcome, per endpoint"
                percent
                labels={['Identify (1:N)', 'Verify self (1:1)']}
                datasets={outcomes.map((o) => ({
                  label: o,
                  color: colorOf(o),
                  data: [pct(accuracy.endpoints.identify.outcomes[o]?.rate), pct(accuracy.endpoints.verify_self.outcomes[o]?.rate)],
                }))}
              />
              <p>
                <small>{accuracy.label}</small>
              </p>
              <p>Disputed-match rate (proxy): {accuracy.disputedMatchRate === null ? '—' : `${pct(accuracy.disputedMatchRate)} %`}</p>
            </>
          )}
        </article>
      </div>
      {billing && (
        <article data-testid="billing">
          <h2>
            Billing report: {billing.orgId} <small>({billing.tier.name})</small>
          </h2>
          <dl class="facts">
            <dt>Included volume</dt>
            <dd>{billing.includedVolume}</dd>
            <dt>Billable calls</dt>
            <dd>{billing.usage.billable}</dd>
            <dt>Overage</dt>
            <dd>
              {billing.overage.volume} ({billing.overage.amount.toFixed(2)} {billing.currency})
            </dd>
            <dt>Amount due</dt>
            <dd>
              <strong>
                {billing.amountDue.toFixed(2)} {billing.currency}
              </strong>
            </dd>
          </dl>
          <p>
            <small>{billing.usage.definition}</small>
          </p>
        </article>
      )}
    </section>
  );
}

function Audit(props: { session: Session }) {
  const api = props.session.api;
  const [filter, setFilter] = useState<{ type: string; severity: '' | 'info' | 'high' }>({ type: '', severity: '' });
  const { list, setPage, load } = usePagedList(
    async (page) =>
      (
        await api.GET('/audit-events', {
          params: { query: { page, pageSize: 15, ...(filter.type ? { type: filter.type } : {}), ...(filter.severity ? { severity: filter.severity } : {}) } },
        })
      ).data,
    [filter.severity],
  );
  return (
    <section>
      <h1>Audit events</h1>
      <FilterBar
        submit="Filter"
        onSubmit={() => {
          setPage(1);
          void load();
        }}
      >
        <FilterInput
          name="type"
          label="Event type"
          placeholder="Type, e.g. operator.created"
          value={filter.type}
          onValue={(type) => setFilter({ ...filter, type })}
        />
        <SelectField
          name="severity"
          label="Severity"
          hiddenLabel
          value={filter.severity}
          options={[['', 'Any severity'], ...asOptions(['info', 'high'] as const)]}
          onValue={(severity) => {
            setPage(1);
            setFilter({ ...filter, severity });
          }}
        />
      </FilterBar>
      <PagedTable
        list={list}
        onPage={setPage}
        testid="audit-events"
        columns={['When', 'Type', 'Severity', 'Actor', 'Subject', 'From']}
        row={(e) => (
          <tr>
            <td>{fmtDate(e.createdAt)}</td>
            <td>
              <code>{e.type}</code>
            </td>
            <td>
              <span class={e.severity === 'high' ? 'badge warn' : 'badge'}>{e.severity}</span>
            </td>
            <td>
              {e.actorType ?? '—'} <small>{e.actorId?.slice(0, 8)}</small>
            </td>
            <td>
              {e.subjectType ?? '—'} <small>{e.subjectId?.slice(0, 8)}</small>
            </td>
            <td title={e.userAgent ?? undefined}>
              {e.ip ?? '—'} <small>{e.userAgent?.slice(0, 24)}</small>
            </td>
          </tr>
        )}
      />
    </section>
  );
}

function Queues(props: { session: Session }) {
  const [error, setError] = useState<string | null>(null);
  const open = async () => {
    // Sets a short-lived HttpOnly cookie scoped to /admin/queues; the dashboard opens in a new tab.
    const { response, error: err } = await props.session.api.POST('/admin/queues/session');
    if (!response.ok) return setError(problem(err));
    window.open('/admin/queues', '_blank', 'noopener');
  };
  return (
    <section>
      <h1>Queues</h1>
      <p>The BullMQ queue dashboard (liveness, embed, search, upstream, webhooks) opens in a new tab with a short-lived cookie.</p>
      <button type="button" onClick={() => void open()}>
        Open the queue dashboard
      </button>
      <ErrorNote error={error} />
    </section>
  );
}
