/** The consumer console (phone-sized first): sign in, link NIN/BVN with a live selfie, history, settings, changes, deletion. */
import type { ComponentChildren } from 'preact';
import { useEffect, useLayoutEffect, useState } from 'preact/hooks';
import type { ApiError } from '../api/client.js';
import { createApiClient, multipart } from '../api/client.js';
import { LANGUAGES, translator, type Language, type MessageKey, type Translate } from '../i18n/index.js';
import { Session } from '../session.js';
import { Capture, Note, Pager, QualityAdvice, fmtDate, fmtScore, saveFile, type QualityIssue } from '../ui/common.js';
import { CodeField, ErrorNote, Field, OutcomeNote, type Outcome } from '../ui/forms.js';
import { usePagedList } from '../ui/lists.js';
import { LivenessCheck } from './LivenessCheck.js';

type Registry = 'nin' | 'bvn';
type View = 'home' | 'link-nin' | 'link-bvn' | 'history' | 'settings' | 'self';
type User = {
  id: string;
  phone: string;
  name: string | null;
  dateOfBirth: string | null;
  ninLinked: boolean;
  bvnLinked: boolean;
  bankAccount: string | null;
  pendingBankAccount: string | null;
};

/** The words a person understands for an error envelope (or a face outcome). */
export function explain(t: Translate, e: ApiError | { outcome?: string; error?: string } | undefined): string {
  const code = e?.outcome && e.outcome !== 'match' ? e.outcome : e?.error;
  const key = `outcome_${code}` as MessageKey;
  const text = t(key);
  return text === key ? t('outcome_generic') : text;
}

/** A history outcome in words (an unknown code is shown as it is). */
function outcomeLabel(t: Translate, outcome: string): string {
  const key = `res_${outcome}` as MessageKey;
  const text = t(key);
  return text === key ? outcome : text;
}

/** One line of advice per capture-quality issue, in the page's language (message keys `quality_<code>`). */
function Advice(props: { t: Translate; issues: readonly string[] | null }) {
  const { t } = props;
  const advice: Record<QualityIssue, string> = {
    face_too_small: t('quality_face_too_small'),
    face_cut_off: t('quality_face_cut_off'),
    not_frontal: t('quality_not_frontal'),
    eyes_not_visible: t('quality_eyes_not_visible'),
    blurred: t('quality_blurred'),
    too_dark: t('quality_too_dark'),
    too_bright: t('quality_too_bright'),
    low_contrast: t('quality_low_contrast'),
  };
  return <QualityAdvice issues={props.issues} advice={advice} heading={t('qualityHeading')} />;
}

/**
 * The ways a consumer proves it is them, one shown at a time: the liveness check first (it shows a
 * live person, not a photo of one), a single photo on request where the policy allows it. Under
 * LIVENESS_MODE=challenge the server answers a photo with `liveness_session_required`
 * (`photoRefused`), and the photo way goes away.
 */
function ProofWays(props: {
  t: Translate;
  photoRefused: boolean;
  /** The liveness check; `onBusy` hides the other way while a check runs (LivenessCheck's `onBusy`). */
  liveness: (onBusy: (busy: boolean) => void) => ComponentChildren;
  photo: ComponentChildren;
}) {
  const { t } = props;
  const [photo, setPhoto] = useState(false);
  const [checking, setChecking] = useState(false);
  if (photo && !props.photoRefused)
    return (
      <>
        {props.photo}
        <button type="button" class="link" onClick={() => setPhoto(false)}>
          {t('useLivenessInstead')}
        </button>
      </>
    );
  return (
    <>
      {props.liveness(setChecking)}
      {!props.photoRefused && !checking && (
        <button type="button" class="link" onClick={() => setPhoto(true)}>
          {t('usePhotoInstead')}
        </button>
      )}
    </>
  );
}

const photoRefusedBy = (e: ApiError | undefined) => e?.error === 'liveness_session_required';

/** The advisory quality issues of a face answer: a 200 body or a 422 error envelope (null without a face). */
const issuesOf = (answer: { quality?: { issues: readonly string[] } | null } | undefined) => answer?.quality?.issues ?? null;

function captureTexts(t: Translate) {
  return {
    start: t('captureStart'),
    take: t('captureTake'),
    retake: t('captureRetake'),
    upload: t('captureUpload'),
    noCamera: t('captureNoCamera'),
    guide: t('captureGuide'),
    preview: t('capturePreview'),
  };
}

export function ConsumerConsole() {
  const [lang, setLang] = useState<Language>('en');
  const t = translator(lang);
  const [session, setSession] = useState<Session | null>(null);
  const [userId, setUserId] = useState<string | null>(null);
  const [view, setView] = useState<View>('home');
  const [ended, setEnded] = useState<string | null>(null);

  // Before the browser paints the page in the new language (a layout effect, not an effect that runs
  // after paint): screen readers and the browser's hyphenation read the words in the language it names.
  useLayoutEffect(() => {
    document.documentElement.lang = LANGUAGES[lang].htmlLang;
  }, [lang]);

  const signedIn = (pair: { accessToken: string; refreshToken: string; expiresIn: number; userId: string }) => {
    const s = new Session(pair, () => {
      setSession(null);
      setUserId(null);
    });
    setEnded(null);
    setSession(s);
    setUserId(pair.userId);
    setView('home');
    void s.api.GET('/users/{id}/preferences', { params: { path: { id: pair.userId } } }).then(({ data }) => data && setLang(data.language));
  };

  return (
    <div class="consumer">
      <header class="bar">
        <strong>{t('app')}</strong>
        <label class="lang">
          <span class="visually-hidden">{t('language')}</span>
          <select
            aria-label={t('language')}
            value={lang}
            onChange={(e) => setLang((e.currentTarget as HTMLSelectElement).value as Language)}
            data-testid="lang-switch"
          >
            {Object.entries(LANGUAGES).map(([k, v]) => (
              <option value={k}>{v.name}</option>
            ))}
          </select>
        </label>
        {session && (
          <button type="button" class="secondary outline small" onClick={() => void session.signOut()}>
            {t('signOut')}
          </button>
        )}
      </header>
      <main class="container narrow">
        {ended && (
          <Note kind="ok" testid="ended">
            {ended}
          </Note>
        )}
        {!session || !userId ? (
          <SignIn t={t} onSignedIn={signedIn} />
        ) : view === 'home' ? (
          <Home t={t} session={session} userId={userId} go={setView} />
        ) : view === 'link-nin' || view === 'link-bvn' ? (
          <Link t={t} session={session} registry={view === 'link-nin' ? 'nin' : 'bvn'} done={() => setView('home')} />
        ) : view === 'history' ? (
          <History t={t} session={session} userId={userId} lang={lang} back={() => setView('home')} />
        ) : view === 'settings' ? (
          <Settings t={t} session={session} userId={userId} onLanguage={setLang} back={() => setView('home')} />
        ) : (
          <SelfService
            t={t}
            session={session}
            userId={userId}
            back={() => setView('home')}
            onDeleted={() => {
              setEnded(t('deleted'));
              session.end('signed_out');
            }}
          />
        )}
      </main>
    </div>
  );
}

function SignIn(props: { t: Translate; onSignedIn: (p: { accessToken: string; refreshToken: string; expiresIn: number; userId: string }) => void }) {
  const { t } = props;
  const api = createApiClient('');
  const [phone, setPhone] = useState('');
  const [code, setCode] = useState('');
  const [sent, setSent] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const request = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const { error: err } = await api.POST('/auth/otp/request', { body: { phone } });
    setBusy(false);
    if (err) return setError(explain(t, err as ApiError));
    setSent(true);
  };
  const verify = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const { data, error: err } = await api.POST('/auth/otp/verify', { body: { phone, code } });
    setBusy(false);
    if (!data) return setError(explain(t, err as ApiError));
    props.onSignedIn(data);
  };

  return (
    <article>
      <h1>{t('signInHeading')}</h1>
      {!sent ? (
        <form onSubmit={request}>
          <Field
            label={t('phone')}
            name="phone"
            type="tel"
            autocomplete="tel"
            inputMode="tel"
            required
            value={phone}
            placeholder={t('phoneHint')}
            onValue={setPhone}
          />
          <button type="submit" aria-busy={busy}>
            {t('sendCode')}
          </button>
        </form>
      ) : (
        <form onSubmit={verify}>
          <Note>{t('codeSent', { phone })}</Note>
          <CodeField label={t('code')} value={code} onValue={setCode} />
          <button type="submit" aria-busy={busy}>
            {t('signIn')}
          </button>
        </form>
      )}
      <ErrorNote error={error} />
    </article>
  );
}

function Home(props: { t: Translate; session: Session; userId: string; go: (v: View) => void }) {
  const { t } = props;
  const [user, setUser] = useState<User | null>(null);
  useEffect(() => {
    void props.session.api.GET('/users/{id}', { params: { path: { id: props.userId } } }).then(({ data }) => data && setUser(data));
  }, [props.userId]);
  if (!user) return <p aria-busy="true" />;
  const status = (linked: boolean) => <span class={linked ? 'badge ok' : 'badge'}>{linked ? t('linked') : t('notLinked')}</span>;
  return (
    <>
      <h1>{t('homeHeading')}</h1>
      <article data-testid="profile">
        <dl class="facts">
          <dt>{t('name')}</dt>
          <dd data-testid="profile-name">{user.name ?? '—'}</dd>
          <dt>{t('phone')}</dt>
          <dd>{user.phone}</dd>
          <dt>NIN</dt>
          <dd data-testid="nin-status">{status(user.ninLinked)}</dd>
          <dt>BVN</dt>
          <dd data-testid="bvn-status">{status(user.bvnLinked)}</dd>
          {user.bankAccount || user.pendingBankAccount ? (
            <>
              <dt>{t('bankAccount')}</dt>
              <dd>
                {user.bankAccount ?? '—'}
                {user.pendingBankAccount && <div class="badge">{t('pending', { value: user.pendingBankAccount })}</div>}
              </dd>
            </>
          ) : null}
        </dl>
      </article>
      <nav class="menu">
        {!user.ninLinked && (
          <button type="button" onClick={() => props.go('link-nin')}>
            {t('linkNin')}
          </button>
        )}
        {!user.bvnLinked && (
          <button type="button" class={user.ninLinked ? '' : 'secondary'} onClick={() => props.go('link-bvn')}>
            {t('linkBvn')}
          </button>
        )}
        <button type="button" class="secondary" onClick={() => props.go('history')}>
          {t('history')}
        </button>
        <button type="button" class="secondary" onClick={() => props.go('settings')}>
          {t('settings')}
        </button>
        {(user.ninLinked || user.bvnLinked) && (
          <button type="button" class="secondary outline" onClick={() => props.go('self')}>
            {t('verifyChange')}
          </button>
        )}
      </nav>
    </>
  );
}

function Link(props: { t: Translate; session: Session; registry: Registry; done: () => void }) {
  const { t, registry } = props;
  const label = registry.toUpperCase();
  const api = props.session.api;
  const [number, setNumber] = useState('');
  const [validation, setValidation] = useState<{ token: string; name: string } | null>(null);
  const [elsewhere, setElsewhere] = useState<{ linkedAt: string; deviceHint: string } | null>(null);
  const [image, setImage] = useState<Blob | null>(null);
  const [captureKey, setCaptureKey] = useState(0);
  const [linkToken, setLinkToken] = useState<string | null>(null);
  const [photoRefused, setPhotoRefused] = useState(false);
  const [linked, setLinked] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [issues, setIssues] = useState<readonly string[] | null>(null);
  const [busy, setBusy] = useState(false);

  const validate = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setElsewhere(null);
    const body = registry === 'nin' ? { nin: number } : { bvn: number };
    const { data, error: err } = await (registry === 'nin'
      ? api.POST('/identity/nin/validate', { body: body as { nin: string } })
      : api.POST('/identity/bvn/validate', { body: body as { bvn: string } }));
    setBusy(false);
    if (!data) return setError(explain(t, err as ApiError));
    if ('alreadyLinked' in data) return setElsewhere({ linkedAt: data.linkedAt, deviceHint: data.deviceHint });
    setValidation({ token: data.validationToken, name: data.matchedName });
  };

  /** With a photo, a reused capture, or a passed liveness session (SPEC 13.1). */
  const verify = async (how: 'photo' | 'reuse' | { livenessSessionId: string }) => {
    if (!validation) return;
    setBusy(true);
    setError(null);
    setIssues(null);
    const body = multipart(
      how === 'reuse'
        ? { validationToken: validation.token, reuseCapture: 'true' }
        : how === 'photo'
          ? { validationToken: validation.token, file: image ?? undefined }
          : { validationToken: validation.token, livenessSessionId: how.livenessSessionId },
    );
    const { data, error: err } = await (registry === 'nin' ? api.POST('/identity/nin/verify-face', body) : api.POST('/identity/bvn/verify-face', body));
    // The capture has been sent: drop it (the preview URL is revoked when Capture remounts).
    setImage(null);
    setCaptureKey((k) => k + 1);
    setBusy(false);
    // Advisory: the outcome is said as before; the advice says what to change in the photo.
    setIssues(issuesOf(data ?? (err as ApiError | undefined)));
    if (photoRefusedBy(err as ApiError | undefined)) setPhotoRefused(true);
    if (!data) return setError(explain(t, err as ApiError));
    setLinkToken(data.linkToken);
  };

  const link = async () => {
    if (!linkToken) return;
    setBusy(true);
    const { data, error: err } = await (registry === 'nin'
      ? api.POST('/identity/nin/link', { body: { linkToken } })
      : api.POST('/identity/bvn/link', { body: { linkToken } }));
    setBusy(false);
    setLinkToken(null);
    if (!data) return setError(explain(t, err as ApiError));
    setLinked(true);
  };

  return (
    <>
      <h1>{t('linkHeading', { registry: label })}</h1>
      {linked ? (
        <>
          <Note kind="ok" testid="linked">
            {t('linkedDone', { registry: label })}
          </Note>
          <button type="button" onClick={props.done}>
            {t('back')}
          </button>
        </>
      ) : (
        <>
          {!validation && (
            <form onSubmit={validate}>
              <Field
                label={t('number', { registry: label })}
                name="number"
                inputMode="numeric"
                pattern="[0-9]{11}"
                maxLength={11}
                required
                value={number}
                onValue={setNumber}
              />
              <button type="submit" aria-busy={busy}>
                {t('check')}
              </button>
            </form>
          )}
          {elsewhere && (
            <Note kind="warn" testid="already-linked">
              {t('alreadyLinked', { registry: label, date: fmtDate(elsewhere.linkedAt), device: elsewhere.deviceHint })}
            </Note>
          )}
          {validation && !linkToken && (
            <article>
              <p data-testid="matched-name">
                <strong>{t('matchedName', { name: validation.name })}</strong>
              </p>
              <p>{t('matchedNameHint')}</p>
              <ProofWays
                t={t}
                photoRefused={photoRefused}
                liveness={(onBusy) => (
                  <>
                    <h2>{t('verifyWithLiveness')}</h2>
                    <LivenessCheck t={t} api={api} id={registry} onBusy={onBusy} onPassed={(livenessSessionId) => void verify({ livenessSessionId })} />
                  </>
                )}
                photo={
                  <>
                    <Capture key={captureKey} id={registry} texts={captureTexts(t)} onChange={setImage} />
                    <button type="button" disabled={!image || busy} aria-busy={busy} onClick={() => void verify('photo')}>
                      {t('verifyFace')}
                    </button>
                  </>
                }
              />
              {registry === 'bvn' && (
                <button type="button" class="secondary" disabled={busy} onClick={() => void verify('reuse')}>
                  {t('reuse')}
                </button>
              )}
            </article>
          )}
          {linkToken && (
            <article>
              <Note kind="ok" testid="face-match">
                {t('match')}
              </Note>
              <button type="button" aria-busy={busy} onClick={() => void link()}>
                {t('link', { registry: label })}
              </button>
            </article>
          )}
          {error && (
            <Note kind="warn" testid="link-error">
              {error}
            </Note>
          )}
          <Advice t={t} issues={issues} />
          <button type="button" class="secondary outline" onClick={props.done}>
            {t('back')}
          </button>
        </>
      )}
    </>
  );
}

type HistoryItem = { referenceId: string; kind: 'identify' | 'verify_self'; outcome: string; score: number | null; createdAt: string; disputed: boolean };

function History(props: { t: Translate; session: Session; userId: string; lang: Language; back: () => void }) {
  const { t } = props;
  const api = props.session.api;
  const {
    list: data,
    setPage,
    load,
  } = usePagedList<HistoryItem>(
    async (page) => (await api.GET('/users/{id}/history', { params: { path: { id: props.userId }, query: { page, pageSize: 10 } } })).data,
  );
  const [disputing, setDisputing] = useState<string | null>(null);
  const [reason, setReason] = useState('');
  const [note, setNote] = useState<Outcome | null>(null);

  const download = async () => {
    const { data } = await api.GET('/users/{id}/history/export', { params: { path: { id: props.userId } }, parseAs: 'blob' });
    if (!data) return;
    saveFile(data, `history-${props.userId}.csv`);
  };

  const send = async (e: Event) => {
    e.preventDefault();
    if (!disputing) return;
    const { error } = await api.POST('/disputes', { body: { referenceId: disputing, ...(reason ? { reason } : {}) } });
    setDisputing(null);
    setReason('');
    setNote(error ? { kind: 'warn', text: explain(t, error as ApiError) } : { kind: 'ok', text: t('disputeSent') });
    void load();
  };

  return (
    <>
      <h1>{t('historyHeading')}</h1>
      <OutcomeNote outcome={note} testid="dispute-note" />
      {!data ? (
        <p aria-busy="true" />
      ) : data.items.length === 0 ? (
        <p>{t('empty')}</p>
      ) : (
        <ul class="entries" data-testid="history">
          {data.items.map((it) => (
            <li key={it.referenceId}>
              <div>
                <strong>{t(`kind_${it.kind}` as MessageKey)}</strong>
                <small>{fmtDate(it.createdAt, LANGUAGES[props.lang].locale)}</small>
              </div>
              <div class="entry-meta">
                <span class={it.outcome === 'match' ? 'badge ok' : 'badge'}>{outcomeLabel(t, it.outcome)}</span>{' '}
                <span>
                  {t('score')}: {fmtScore(it.score)}
                </span>
                {it.disputed ? (
                  <span class="badge warn">{t('disputed')}</span>
                ) : (
                  <button type="button" class="secondary outline small" onClick={() => setDisputing(it.referenceId)}>
                    {t('dispute')}
                  </button>
                )}
              </div>
              {disputing === it.referenceId && (
                <form onSubmit={send} class="dispute-form">
                  <label>
                    {t('reason')}
                    <textarea name="reason" maxLength={2000} value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
                  </label>
                  <button type="submit">{t('sendDispute')}</button>
                </form>
              )}
            </li>
          ))}
        </ul>
      )}
      {data && (
        <Pager
          page={data.page}
          pageSize={data.pageSize}
          total={data.total}
          onPage={setPage}
          labels={{ prev: t('prev'), next: t('next'), of: (a, b) => t('pageOf', { a, b }) }}
        />
      )}
      <div class="row">
        <button type="button" class="secondary" onClick={() => void download()}>
          {t('download')}
        </button>
        <button type="button" class="secondary outline" onClick={props.back}>
          {t('back')}
        </button>
      </div>
    </>
  );
}

function Settings(props: { t: Translate; session: Session; userId: string; onLanguage: (l: Language) => void; back: () => void }) {
  const { t } = props;
  const api = props.session.api;
  const [prefs, setPrefs] = useState<{ notifyChannel: 'sms' | 'none'; language: Language; marketingOptIn: boolean } | null>(null);
  const [saved, setSaved] = useState(false);
  useEffect(() => {
    void api.GET('/users/{id}/preferences', { params: { path: { id: props.userId } } }).then(({ data }) => data && setPrefs(data));
  }, []);
  if (!prefs) return <p aria-busy="true" />;
  const save = async (e: Event) => {
    e.preventDefault();
    const { data } = await api.PATCH('/users/{id}/preferences', { params: { path: { id: props.userId } }, body: prefs });
    if (data) {
      setSaved(true);
      props.onLanguage(data.language);
    }
  };
  return (
    <>
      <h1>{t('prefsHeading')}</h1>
      <form onSubmit={save}>
        <label>
          {t('language')}
          <select name="language" value={prefs.language} onChange={(e) => setPrefs({ ...prefs, language: e.currentTarget.value as Language })}>
            {Object.entries(LANGUAGES).map(([k, v]) => (
              <option value={k}>{v.name}</option>
            ))}
          </select>
        </label>
        <fieldset>
          <legend>{t('notify')}</legend>
          {(['sms', 'none'] as const).map((c) => (
            <label>
              <input type="radio" name="notify" checked={prefs.notifyChannel === c} onChange={() => setPrefs({ ...prefs, notifyChannel: c })} />
              {t(`notify_${c}`)}
            </label>
          ))}
        </fieldset>
        <label>
          <input
            type="checkbox"
            role="switch"
            checked={prefs.marketingOptIn}
            onChange={(e) => setPrefs({ ...prefs, marketingOptIn: e.currentTarget.checked })}
          />
          {t('marketing')}
        </label>
        <button type="submit">{t('save')}</button>
      </form>
      {saved && (
        <Note kind="ok" testid="prefs-saved">
          {t('saved')}
        </Note>
      )}
      <div class="row">
        <button type="button" class="secondary outline" onClick={props.back}>
          {t('back')}
        </button>
      </div>
    </>
  );
}

function SelfService(props: { t: Translate; session: Session; userId: string; back: () => void; onDeleted: () => void }) {
  const { t } = props;
  const api = props.session.api;
  const [image, setImage] = useState<Blob | null>(null);
  const [captureKey, setCaptureKey] = useState(0);
  const [proof, setProof] = useState<string | null>(null);
  const [photoRefused, setPhotoRefused] = useState(false);
  const [phone, setPhone] = useState('');
  const [bank, setBank] = useState('');
  const [confirming, setConfirming] = useState(false);
  const [note, setNote] = useState<Outcome | null>(null);
  const [issues, setIssues] = useState<readonly string[] | null>(null);
  const [busy, setBusy] = useState(false);

  /** With a photo, or a passed liveness session (SPEC 13.1). */
  const verify = async (livenessSessionId?: string) => {
    if (!image && !livenessSessionId) return;
    setBusy(true);
    setNote(null);
    setIssues(null);
    const { data, error } = await api.POST('/verify/self', multipart(livenessSessionId ? { livenessSessionId } : { image: image! }));
    setImage(null);
    setCaptureKey((k) => k + 1);
    setBusy(false);
    setIssues(issuesOf(data ?? (error as ApiError | undefined)));
    if (photoRefusedBy(error as ApiError | undefined)) setPhotoRefused(true);
    if (data?.proofToken) return setProof(data.proofToken);
    setNote({ kind: 'warn', text: explain(t, data ?? (error as ApiError)) });
  };

  const change = async (body: { phone?: string; bankAccount?: string }) => {
    if (!proof) return;
    const { data, error } = await api.PATCH('/users/{id}', { params: { path: { id: props.userId } }, body: { proofToken: proof, ...body } });
    setProof(null); // single-use either way
    setIssues(null); // the advice was about the capture that gave this proof
    if (!data) return setNote({ kind: 'warn', text: explain(t, error as ApiError) });
    setNote({ kind: 'ok', text: data.status === 'pending_upstream' ? t('pending', { value: data.user.pendingBankAccount ?? '' }) : t('applied') });
  };

  // The right of access: everything held about the consumer, as a JSON file. The API asks for the
  // proof of a fresh selfie (X-Proof-Token), like a change: a stolen session alone does not get it.
  const downloadMyData = async () => {
    if (!proof) return;
    const { data, error } = await api.GET('/users/{id}/export', {
      params: { path: { id: props.userId } },
      headers: { 'X-Proof-Token': proof },
      parseAs: 'blob',
    });
    setProof(null); // single-use either way
    if (!data) return setNote({ kind: 'warn', text: explain(t, error as ApiError) });
    saveFile(data, `my-data-${props.userId}.json`);
  };

  const remove = async () => {
    if (!proof) return;
    setBusy(true);
    const { data, error } = await api.DELETE('/users/{id}', { params: { path: { id: props.userId } }, body: { proofToken: proof } });
    setBusy(false);
    setProof(null);
    if (!data) return setNote({ kind: 'warn', text: explain(t, error as ApiError) });
    props.onDeleted();
  };

  return (
    <>
      <h1>{t('selfHeading')}</h1>
      <OutcomeNote outcome={note} testid="self-note" />
      {!proof && <Advice t={t} issues={issues} />}
      {!proof ? (
        <article>
          <p>{t('selfIntro')}</p>
          <ProofWays
            t={t}
            photoRefused={photoRefused}
            liveness={(onBusy) => (
              <>
                <h2>{t('verifyWithLiveness')}</h2>
                <LivenessCheck t={t} api={api} id="self" onBusy={onBusy} onPassed={(id) => void verify(id)} />
              </>
            )}
            photo={
              <>
                <Capture key={captureKey} id="self" texts={captureTexts(t)} onChange={setImage} />
                <button type="button" disabled={!image || busy} aria-busy={busy} onClick={() => void verify()}>
                  {t('verifySelf')}
                </button>
              </>
            }
          />
        </article>
      ) : (
        <article>
          <Note kind="ok" testid="proven">
            {t('proven')}
          </Note>
          <Advice t={t} issues={issues} />
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void change({ phone });
            }}
          >
            <Field label={t('newPhone')} name="newPhone" type="tel" required value={phone} onValue={setPhone} />
            <button type="submit" class="secondary">
              {t('changePhone')}
            </button>
          </form>
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void change({ bankAccount: bank });
            }}
          >
            <Field label={t('newBank')} name="bankAccount" inputMode="numeric" pattern="[0-9]{10}" maxLength={10} required value={bank} onValue={setBank} />
            <button type="submit" class="secondary">
              {t('changeBank')}
            </button>
          </form>
          <button type="button" class="secondary" data-testid="download-my-data" onClick={() => void downloadMyData()}>
            {t('downloadMyData')}
          </button>
          <hr />
          {!confirming ? (
            <button type="button" class="danger" onClick={() => setConfirming(true)}>
              {t('deleteAccount')}
            </button>
          ) : (
            <div class="confirm" role="alertdialog" aria-labelledby="delete-warn">
              <p id="delete-warn">
                <strong>{t('deleteWarn')}</strong>
              </p>
              <div class="row">
                <button type="button" class="danger" aria-busy={busy} onClick={() => void remove()}>
                  {t('deleteConfirm')}
                </button>
                <button type="button" class="secondary outline" onClick={() => setConfirming(false)}>
                  {t('cancel')}
                </button>
              </div>
            </div>
          )}
        </article>
      )}
      <button type="button" class="secondary outline" onClick={props.back}>
        {t('back')}
      </button>
    </>
  );
}
