/**
 * Pure helpers on registry records and clients, for the identity workflow: masking a name, comparing
 * two registries' records of one person, and a coarse device description.
 */
import type { RegistryRecordSnapshot } from '../../models/index.js';
import type { RegistryRecord } from './registry-client.js';

export { maskName } from '../../platform/masking.js';

export const fullName = (r: { firstName: string; middleName?: string | null; lastName: string }) =>
  [r.firstName, r.middleName, r.lastName].filter((p) => p && p.trim()).join(' ');

/** A coarse device description from a User-Agent: never the raw string, never a version. */
export function deviceHint(userAgent: string | null | undefined): string {
  const ua = userAgent ?? '';
  if (/iPad/i.test(ua)) return 'iPad';
  if (/iPhone|iPod/i.test(ua)) return 'iPhone';
  if (/Android/i.test(ua)) return /Mobile/i.test(ua) ? 'Android phone' : 'Android tablet';
  if (/okhttp/i.test(ua)) return 'Android device';
  if (/CFNetwork|Darwin/i.test(ua)) return 'Apple device';
  if (/Windows Phone/i.test(ua)) return 'Windows phone';
  if (/Windows/i.test(ua)) return 'Windows computer';
  if (/CrOS/i.test(ua)) return 'Chromebook';
  if (/Macintosh|Mac OS X/i.test(ua)) return 'Mac computer';
  if (/Linux|X11/i.test(ua)) return 'Linux computer';
  return 'unknown device';
}

const nameWords = (s: string | null | undefined) =>
  (s ?? '')
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();

/**
 * Which of name and date of birth disagree between two registry records. Names compare without case,
 * accents or punctuation; first and last name may be swapped (registries disagree on order); the
 * middle name is not compared (one registry often lacks it).
 */
export function recordDisagreements(a: RegistryRecordSnapshot, b: RegistryRecordSnapshot): Array<'name' | 'dateOfBirth'> {
  const out: Array<'name' | 'dateOfBirth'> = [];
  const [af, al, bf, bl] = [nameWords(a.firstName), nameWords(a.lastName), nameWords(b.firstName), nameWords(b.lastName)];
  const sameName = (af === bf && al === bl) || (af === bl && al === bf);
  if (!sameName) out.push('name');
  if (a.dateOfBirth !== b.dateOfBirth) out.push('dateOfBirth');
  return out;
}

/** What a link keeps of a registry record (never the photo). */
export const snapshot = (r: RegistryRecord): RegistryRecordSnapshot => ({
  firstName: r.firstName,
  lastName: r.lastName,
  middleName: r.middleName ?? null,
  dateOfBirth: r.dateOfBirth,
  gender: r.gender,
});
