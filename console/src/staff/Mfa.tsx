/**
 * Staff second factor in the console: setup first asks for the current password (the API requires it,
 * so that a session left open cannot enrol someone else's authenticator), then shows the otpauth URI as
 * a QR code (qrcode-generator, drawn locally: the secret never leaves the page) with the secret in text
 * for manual entry, asks for the first code, then shows the 10 recovery codes once. The password stays
 * in the component's state only until the confirmation is answered.
 */
import { useState } from 'preact/hooks';
import qrcode from 'qrcode-generator';
import type { Session } from '../session.js';
import { Note } from '../ui/common.js';
import { CodeField, ErrorNote, Field } from '../ui/forms.js';
import { problem } from './staff-common.js';

/** The QR code of an otpauth URI, as an image (a data URL: the console's CSP allows `data:` images). */
function otpauthQr(uri: string): string {
  const qr = qrcode(0, 'M');
  qr.addData(uri);
  qr.make();
  return qr.createDataURL(4, 4);
}

export function MfaSetup(props: { session: Session; required: boolean; done: () => void | Promise<void> }) {
  const [setup, setSetup] = useState<{ secret: string; otpauthUri: string } | null>(null);
  const [password, setPassword] = useState('');
  const [code, setCode] = useState('');
  const [recoveryCodes, setRecoveryCodes] = useState<string[] | null>(null);
  const [error, setError] = useState<string | null>(null);

  const start = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const { data, error: err } = await props.session.api.POST('/auth/operator/mfa/setup', { body: { password } });
    if (!data) return setError(problem(err));
    setSetup(data);
  };

  const confirm = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const { data, error: err } = await props.session.api.POST('/auth/operator/mfa/confirm', { body: { code, password } });
    if (!data) return setError(problem(err));
    setPassword('');
    setRecoveryCodes(data.recoveryCodes);
  };

  if (recoveryCodes) {
    return (
      <article class="narrow" data-testid="mfa-recovery-codes">
        <h1>Recovery codes</h1>
        <Note kind="warn">
          Write these down or store them in your password manager now: they are shown only once. Each signs you in once if you lose your authenticator.
        </Note>
        <ol class="recovery-codes">
          {recoveryCodes.map((c) => (
            <li key={c}>
              <code>{c}</code>
            </li>
          ))}
        </ol>
        <button type="button" onClick={() => void props.done()}>
          I have saved them
        </button>
      </article>
    );
  }
  return (
    <article class="narrow" data-testid="mfa-setup">
      <h1>Two-step sign-in</h1>
      {props.required && <Note>Your organisation requires a second factor for staff. Set it up before anything else.</Note>}
      {!setup && (
        <form onSubmit={start} data-testid="mfa-password">
          <Field label="Your password" type="password" name="password" autocomplete="current-password" required value={password} onValue={setPassword} />
          <button type="submit">Continue</button>
        </form>
      )}
      {setup && (
        <>
          <p>Scan this code with an authenticator app (a TOTP app), or type the key in it.</p>
          <img src={otpauthQr(setup.otpauthUri)} alt="QR code of your authenticator key" data-testid="mfa-qr" width={200} height={200} />
          <p>
            Key: <code data-testid="mfa-secret">{setup.secret}</code>
          </p>
          <form onSubmit={confirm}>
            <CodeField label="The 6-digit code your app shows" value={code} onValue={setCode} />
            <button type="submit">Turn on two-step sign-in</button>
          </form>
        </>
      )}
      <ErrorNote error={error} />
      {!props.required && (
        <button type="button" class="secondary outline" onClick={() => void props.done()}>
          Back
        </button>
      )}
    </article>
  );
}
