/** Form fields shared by the consoles: a labelled input, the one-time-code input, a labelled select, the error note. */
import type { ComponentChildren, InputHTMLAttributes } from 'preact';
import { Note } from './common.js';

type InputProps = Omit<InputHTMLAttributes<HTMLInputElement>, 'value' | 'onInput' | 'label'>;

/** An input inside its label (Pico's accessible layout): the label's text, then the field. */
export function Field(props: InputProps & { label: ComponentChildren; value: string; onValue: (value: string) => void }) {
  const { label, value, onValue, ...input } = props;
  return (
    <label>
      {label}
      <input {...input} value={value} onInput={(e) => onValue(e.currentTarget.value)} />
    </label>
  );
}

/** The 6-digit one-time code (SMS or authenticator app): numeric keyboard, the browser's code autofill. */
export function CodeField(props: { label: ComponentChildren; value: string; onValue: (value: string) => void }) {
  return (
    <Field
      label={props.label}
      name="code"
      inputMode="numeric"
      autocomplete="one-time-code"
      pattern="[0-9]{6}"
      maxLength={6}
      required
      value={props.value}
      onValue={props.onValue}
    />
  );
}

/**
 * A select of fixed options: inside its visible label (`inline` for a filter beside others), or, with
 * `hiddenLabel`, named by `aria-label` only (a filter bar whose placeholder options say what it is).
 */
export function SelectField<V extends string>(props: {
  label: string;
  name: string;
  value: V;
  options: readonly (readonly [V, string])[];
  onValue: (value: V) => void;
  inline?: boolean;
  hiddenLabel?: boolean;
}) {
  const select = (
    <select
      name={props.name}
      aria-label={props.hiddenLabel ? props.label : undefined}
      value={props.value}
      onChange={(e) => props.onValue(e.currentTarget.value as V)}
    >
      {props.options.map(([value, text]) => (
        <option value={value}>{text}</option>
      ))}
    </select>
  );
  if (props.hiddenLabel) return select;
  return (
    <label class={props.inline ? 'inline' : undefined}>
      {props.label}
      {select}
    </label>
  );
}

/** `[value, value]` options: the value is its own text (statuses, kinds shown as the API spells them). */
export const asOptions = <V extends string>(values: readonly V[]): (readonly [V, string])[] => values.map((v) => [v, v] as const);

/** The warning under a form or an action when the last request failed; nothing otherwise. */
export function ErrorNote(props: { error: string | null }) {
  return props.error ? <Note kind="warn">{props.error}</Note> : null;
}

/** A field named by `aria-label` only, for a filter bar where the placeholder shows what to type. */
export function FilterInput(props: InputProps & { label: string; value: string; onValue: (value: string) => void }) {
  const { label, value, onValue, ...input } = props;
  return <input {...input} aria-label={label} value={value} onInput={(e) => onValue(e.currentTarget.value)} />;
}

/** A list's filter bar: the fields in a row, then the button that applies them (Enter in a field does too). */
export function FilterBar(props: { submit: string; onSubmit: () => void; children: ComponentChildren }) {
  return (
    <form
      class="filters"
      onSubmit={(e) => {
        e.preventDefault();
        props.onSubmit();
      }}
    >
      {props.children}
      <button type="submit" class="secondary">
        {props.submit}
      </button>
    </form>
  );
}

/** What came of the last action, good or bad, when there is something to say. */
export type Outcome = { kind: 'ok' | 'warn'; text: string };

export function OutcomeNote(props: { outcome: Outcome | null; testid: string }) {
  const o = props.outcome;
  return o ? (
    <Note kind={o.kind} testid={props.testid}>
      {o.text}
    </Note>
  ) : null;
}
