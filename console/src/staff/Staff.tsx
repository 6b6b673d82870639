/** The staff console: the operator's search desk and, for administrators, the office. English only (staff pages). */
import { useEffect, useState } from 'preact/hooks';
import { createApiClient, multipart, type ApiError } from '../api/client.js';
import { Session } from '../session.js';
import { Capture, Note, QualityAdvice, fmtDate, fmtScore, type QualityIssue } from '../ui/common.js';
import { ErrorNote, Field } from '../ui/forms.js';
import { Table, usePagedList } from '../ui/lists.js';
import { AdminOffice } from './Admin.js';
import { problem, type StaffIdentity } from './staff-common.js';
import { MfaSetup } from './Mfa.js';
import { SearchLogTable } from './SearchLogTable.js';

type OperatorPair = { accessToken: string; refreshToken: string; expiresIn: number; operatorId: string; mustResetPassword: boolean; mfaSetupRequired?: true };

export function StaffConsole() {
  const [session, setSession] = useState<Session | null>(null);
  const [me, setMe] = useState<StaffIdentity | null>(null);
  const [mustReset, setMustReset] = useState<{ currentPassword: string } | null>(null);
  const [tab, setTab] = useState<'desk' | 'office'>('desk');
  // null: no MFA screen; 'required': the policy asks before anything else; 'chosen': opened by the operator.
  const [mfa, setMfa] = useState<'required' | 'chosen' | null>(null);

  const signedIn = async (pair: OperatorPair, identifier: string, password: string) => {
    const s = new Session(pair, () => {
      setSession(null);
      setMe(null);
    });
    setSession(s);
    setMfa(pair.mfaSetupRequired ? 'required' : null);
    if (pair.mustResetPassword) {
      setMustReset({ currentPassword: password });
      setMe({ operatorId: pair.operatorId, identifier, administrator: false });
      return;
    }
    if (pair.mfaSetupRequired) {
      setMe({ operatorId: pair.operatorId, identifier, administrator: false });
      return;
    }
    await whoAmI(s, pair.operatorId, identifier);
  };

  // An administrator can read any operator, itself included; an operator is refused (403): that is the role.
  const whoAmI = async (s: Session, operatorId: string, identifier: string) => {
    const { data } = await s.api.GET('/operators/{id}', { params: { path: { id: operatorId } } });
    setMe({ operatorId, identifier, administrator: data?.operator.role === 'administrator' });
    setTab(data?.operator.role === 'administrator' ? 'office' : 'desk');
  };

  return (
    <div class="staff">
      <header class="bar">
        <strong>faceid staff</strong>
        {me && !mustReset && !mfa && (
          <nav class="tabs" aria-label="Sections">
            <button
              type="button"
              class={tab === 'desk' ? '' : 'secondary outline'}
              aria-current={tab === 'desk' ? 'page' : undefined}
              onClick={() => setTab('desk')}
            >
              Search desk
            </button>
            {me.administrator && (
              <button
                type="button"
                class={tab === 'office' ? '' : 'secondary outline'}
                aria-current={tab === 'office' ? 'page' : undefined}
                onClick={() => setTab('office')}
              >
                Office
              </button>
            )}
          </nav>
        )}
        {session && me && !mustReset && !mfa && (
          <button type="button" class="secondary outline small" onClick={() => setMfa('chosen')}>
            Two-step sign-in
          </button>
        )}
        {session && (
          <span class="who">
            {me?.identifier}{' '}
            <button type="button" class="secondary outline small" onClick={() => void session.signOut()}>
              Sign out
            </button>
          </span>
        )}
      </header>
      <main class="container">
        {!session || !me ? (
          <StaffSignIn onSignedIn={signedIn} />
        ) : mustReset ? (
          <SetPassword
            session={session}
            currentPassword={mustReset.currentPassword}
            done={async () => {
              setMustReset(null);
              if (mfa !== 'required') await whoAmI(session, me.operatorId, me.identifier);
            }}
          />
        ) : mfa ? (
          <MfaSetup
            session={session}
            required={mfa === 'required'}
            done={async () => {
              setMfa(null);
              await whoAmI(session, me.operatorId, me.identifier);
            }}
          />
        ) : tab === 'desk' ? (
          <SearchDesk session={session} />
        ) : (
          <AdminOffice session={session} me={me} />
        )}
      </main>
    </div>
  );
}

function StaffSignIn(props: { onSignedIn: (pair: OperatorPair, identifier: string, password: string) => Promise<void> }) {
  const [identifier, setIdentifier] = useState('');
  const [password, setPassword] = useState('');
  // Asked once the service answers `mfa_required`: the authenticator's code or a recovery code.
  const [otp, setOtp] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const { data, error: err } = await createApiClient('').POST('/auth/operator/login', { body: { identifier, password, ...(otp ? { otp } : {}) } });
    if (!data) {
      if ((err as ApiError | undefined)?.error === 'mfa_required') {
        if (otp) setError('That code was not accepted. Enter the current code of your app, or an unused recovery code.');
        setOtp('');
        return;
      }
      return setError(problem(err));
    }
    await props.onSignedIn(data, identifier, password);
  };
  return (
    <article class="narrow">
      <h1>Staff sign-in</h1>
      <form onSubmit={submit}>
        <Field label="Identifier" name="identifier" autocomplete="username" required value={identifier} onValue={setIdentifier} />
        <Field label="Password" name="password" type="password" autocomplete="current-password" required value={password} onValue={setPassword} />
        {otp !== null && (
          <Field
            label="Code from your authenticator app (or a recovery code)"
            name="otp"
            autocomplete="one-time-code"
            required
            autoFocus
            value={otp}
            onValue={setOtp}
          />
        )}
        <button type="submit">Sign in</button>
      </form>
      <ErrorNote error={error} />
    </article>
  );
}

function SetPassword(props: { session: Session; currentPassword: string; done: () => Promise<void> }) {
  const [next, setNext] = useState('');
  const [again, setAgain] = useState('');
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    if (next !== again) return setError('The two passwords differ.');
    const { data, error: err } = await props.session.api.POST('/auth/operator/set-password', {
      body: { currentPassword: props.currentPassword, newPassword: next },
    });
    if (!data) return setError(problem(err));
    await props.done();
  };
  return (
    <article class="narrow">
      <h1>Choose your password</h1>
      <Note>Your password was issued by an administrator. Choose your own before anything else (at least 8 characters).</Note>
      <form onSubmit={submit}>
        <Field label="New password" name="newPassword" type="password" autocomplete="new-password" minLength={8} required value={next} onValue={setNext} />
        <Field
          label="New password again"
          name="newPasswordAgain"
          type="password"
          autocomplete="new-password"
          minLength={8}
          required
          value={again}
          onValue={setAgain}
        />
        <button type="submit">Set password</button>
      </form>
      <ErrorNote error={error} />
    </article>
  );
}

type IdentifyResult = {
  referenceId: string;
  outcome: string;
  candidates: { userId: string; score: number; rank: number }[];
  latencyMs: { total: number };
  quality: { score: number; issues: readonly string[] } | null;
  escalatedAt?: string;
  at: string;
};

/** What the operator can do about each capture-quality issue of the probe (staff pages are English). */
const PROBE_ADVICE: Record<QualityIssue, string> = {
  face_too_small: 'The face is too small in the photo: move the camera closer or use a larger photo.',
  face_cut_off: 'The face is cut off: keep the whole face inside the frame.',
  not_frontal: 'The face is turned or tilted: ask the person to look straight at the camera.',
  eyes_not_visible: 'The eyes are hidden or closed: ask for open eyes and no sunglasses, hair or hand over them.',
  blurred: 'The photo is blurred: hold the camera still and let it focus.',
  too_dark: 'The photo is too dark: use a brighter place or more light on the face.',
  too_bright: 'The photo is too bright: avoid direct sunlight, glare or flash on the face.',
  low_contrast: 'The face has too little contrast: use even, brighter light.',
};

function SearchDesk(props: { session: Session }) {
  const [image, setImage] = useState<Blob | null>(null);
  const [captureKey, setCaptureKey] = useState(0);
  const [attested, setAttested] = useState(false);
  const [result, setResult] = useState<IdentifyResult | null>(null);
  const {
    list: past,
    setPage: setPastPage,
    load: loadPast,
  } = usePagedList(async (page) => (await props.session.api.GET('/identify/mine', { params: { query: { page, pageSize: 5 } } })).data);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => setError(null), [image]);

  const identify = async (e: Event) => {
    e.preventDefault();
    if (!image || !attested) return;
    setBusy(true);
    setError(null);
    const { data, error: err } = await props.session.api.POST('/identify', multipart({ attestation: 'true', file: image }, 'probe.jpg'));
    // Sent: the probe leaves the browser's memory.
    setImage(null);
    setCaptureKey((k) => k + 1);
    setAttested(false);
    setBusy(false);
    if (!data) return setError(problem(err));
    const r = { ...data, at: new Date().toISOString() };
    setResult(r);
    await loadPast();
  };

  const escalate = async () => {
    if (!result) return;
    const { data, error: err } = await props.session.api.POST('/identify/{referenceId}/escalate', { params: { path: { referenceId: result.referenceId } } });
    if (!data) return setError(problem(err));
    const r = { ...result, escalatedAt: data.escalatedAt };
    setResult(r);
    await loadPast();
  };

  return (
    <div class="grid-2">
      <section>
        <h1>Identify a person</h1>
        <form onSubmit={identify}>
          <Capture
            key={captureKey}
            id="probe"
            onChange={setImage}
            texts={{
              start: 'Use camera',
              take: 'Take photo',
              retake: 'Retake',
              upload: 'Upload a photo',
              noCamera: 'No camera available: upload a photo.',
              guide: 'One face, front-on, in good light.',
              preview: 'Probe photo',
            }}
          />
          <label>
            <input type="checkbox" name="attestation" checked={attested} onChange={(e) => setAttested(e.currentTarget.checked)} />I confirm that this search has
            a lawful basis and the person was told (attestation)
          </label>
          <button type="submit" disabled={!image || !attested || busy} aria-busy={busy}>
            Identify
          </button>
        </form>
        <ErrorNote error={error} />
      </section>
      <section>
        <h2>Result</h2>
        {!result ? (
          <p>No search yet.</p>
        ) : (
          <article data-testid="identify-result">
            <p>
              Outcome: <strong data-testid="outcome">{result.outcome}</strong>{' '}
              <small>
                ({Math.round(result.latencyMs.total)} ms, reference {result.referenceId.slice(0, 8)})
              </small>
            </p>
            {result.candidates.length === 0 ? (
              <p>No candidate at or above the threshold.</p>
            ) : (
              <Table testid="candidates" columns={['Rank', 'User', 'Score']}>
                {result.candidates.map((c) => (
                  <tr>
                    <td>{c.rank}</td>
                    <td>
                      <code>{c.userId}</code>
                    </td>
                    <td>{fmtScore(c.score)}</td>
                  </tr>
                ))}
              </Table>
            )}
            <QualityAdvice
              issues={result.quality?.issues}
              advice={PROBE_ADVICE}
              heading={`Probe photo quality ${result.quality?.score ?? '—'}/100: a better photo gives a more reliable search.`}
            />
            {result.escalatedAt ? (
              <Note kind="ok" testid="escalated">
                Escalated {fmtDate(result.escalatedAt)}
              </Note>
            ) : (
              <button type="button" class="secondary" onClick={() => void escalate()}>
                Escalate
              </button>
            )}
          </article>
        )}
        <h2>Your past searches</h2>
        {!past ? <p>None yet.</p> : <SearchLogTable list={past} onPage={setPastPage} empty="None yet." testid="past-searches" />}
      </section>
    </div>
  );
}
