/**
 * Phone numbers: validated and normalised to E.164 by libphonenumber-js (full metadata), with Nigeria
 * as the default region, so `0803 123 4567`, `08031234567` and `+2348031234567` are one number.
 * The whole input must be a number (no extraction from surrounding text, no extension), and numbers
 * that cannot receive an SMS (fixed lines, premium-rate, toll-free, shared-cost...) are refused.
 * Every route that takes a phone (OTP sign-in, a profile's phone change) uses this one function, then
 * requireSmsCountry: only numbers of OTP_ALLOWED_COUNTRY_CODES are sent codes or notices.
 */
import { parsePhoneNumberFromString, type NumberType } from 'libphonenumber-js/max';
import { AppError } from './errors.js';

export const DEFAULT_PHONE_REGION = 'NG' as const;

const NOT_SMS_CAPABLE = new Set<NonNullable<NumberType>>(['FIXED_LINE', 'PREMIUM_RATE', 'TOLL_FREE', 'SHARED_COST', 'UAN', 'VOICEMAIL', 'PAGER']);

/** E.164 form of a phone number, or null when it is not a valid SMS-capable number. */
export function normalisePhone(raw: string): string | null {
  if (typeof raw !== 'string' || raw.length > 40) return null;
  const parsed = parsePhoneNumberFromString(raw.trim(), { defaultCountry: DEFAULT_PHONE_REGION, extract: false });
  if (!parsed || !parsed.isValid() || parsed.ext) return null;
  const type = parsed.getType();
  if (type && NOT_SMS_CAPABLE.has(type)) return null;
  return parsed.number;
}

/** E.164 form, or 400 `validation_failed` naming the field (same shape as schema violations). */
export function requirePhone(raw: string, field = 'phone'): string {
  const e164 = normalisePhone(raw);
  if (!e164) {
    throw new AppError('validation_failed', 'The request is not valid', {
      details: { errors: [{ in: 'body', path: `/${field}`, message: 'must be a valid mobile phone number (E.164, or a Nigerian local number)' }] },
    });
  }
  return e164;
}

/** The country calling code of an E.164 number (`+2348031234567` → `234`); null when it is not one. */
export function countryCallingCode(e164: string): string | null {
  return parsePhoneNumberFromString(e164)?.countryCallingCode ?? null;
}

/** Whether SMS may go to this E.164 number: its country calling code is one of `allowed` (OTP_ALLOWED_COUNTRY_CODES). */
export function smsAllowedTo(e164: string, allowed: readonly string[]): boolean {
  const code = countryCallingCode(e164);
  return code !== null && allowed.includes(code);
}

/**
 * The E.164 number, or 400 `phone_not_supported` when no SMS may go to its country (SMS pumping: codes
 * and notices to premium international routes). Called after requirePhone, so the form is valid.
 */
export function requireSmsCountry(e164: string, allowed: readonly string[], field = 'phone'): string {
  if (!smsAllowedTo(e164, allowed)) {
    throw new AppError('phone_not_supported', `Numbers of this country are not served: one of +${allowed.join(', +')} is required`, {
      details: { errors: [{ in: 'body', path: `/${field}`, message: `must be a mobile number of +${allowed.join(', +')}` }] },
    });
  }
  return e164;
}
