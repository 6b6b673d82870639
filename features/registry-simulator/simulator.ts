/**
 * The identity registry simulator: a separate system (it only shares the web process and the database)
 * that stands in for the national identity (NIN) and bank verification (BVN) registries. It keeps its
 * persons in `registry_persons`, issues random unused 11-digit numbers, and answers lookups, a name
 * search and dashboard counts. The service proper never reads this table: it reaches the registry over
 * HTTP at REGISTRY_URL (features/identity/registry-client.ts), so a real registry adapter replaces the
 * simulator by changing that URL only.
 */
import { randomInt } from 'node:crypto';
import type { Knex } from 'knex';
import sharp from 'sharp';
import { AppError } from '../../platform/errors.js';
import { RegistryPersonsRepository, type PersonRow, type RegistryKind } from './repository.js';
import { pageOf } from '../../platform/lists/paging.js';

export type { RegistryKind };
export type IssueWhat = 'nin' | 'bvn' | 'both';
export type Gender = 'male' | 'female' | 'other';

export interface EnrolInput {
  /** Numbers to record as sent (11 digits); the others the person gets (`issue`) are issued. */
  nin?: string | null;
  bvn?: string | null;
  firstName: string;
  lastName: string;
  middleName?: string | null;
  /** YYYY-MM-DD */
  dateOfBirth: string;
  gender: string;
  phone?: string | null;
  issue?: IssueWhat;
  photo: Buffer;
}

/** A person as the registry answers it (the photo only on explicit request). */
export interface RegistryPersonView {
  id: string;
  nin?: string;
  bvn?: string;
  firstName: string;
  lastName: string;
  middleName?: string;
  dateOfBirth: string;
  gender: string;
  phone?: string;
  enrolledAt: string;
  photo?: string;
  photoMime?: string;
}

const MAX_NUMBER_ATTEMPTS = 20;
const PHOTO_MIME: Record<string, string> = { jpeg: 'image/jpeg', png: 'image/png', webp: 'image/webp' };

export const NUMBER_PATTERN = /^[0-9]{11}$/;

/** A random 11-digit number. BVNs start with 22 like the real ones; NINs never start with 0. */
export function randomNumber(kind: RegistryKind): string {
  const digits = (n: number) => Array.from({ length: n }, () => String(randomInt(10))).join('');
  return kind === 'bvn' ? `22${digits(9)}` : `${randomInt(1, 10)}${digits(10)}`;
}

export function normaliseGender(raw: string): Gender {
  const g = raw.trim().toLowerCase();
  if (g === 'm' || g === 'male') return 'male';
  if (g === 'f' || g === 'female') return 'female';
  return 'other';
}

function toView(row: PersonRow, includePhoto: boolean): RegistryPersonView {
  const view: RegistryPersonView = {
    id: row.id,
    ...(row.nin ? { nin: row.nin } : {}),
    ...(row.bvn ? { bvn: row.bvn } : {}),
    firstName: row.firstName,
    lastName: row.lastName,
    ...(row.middleName ? { middleName: row.middleName } : {}),
    dateOfBirth: row.dateOfBirth,
    gender: row.gender,
    ...(row.phone ? { phone: row.phone } : {}),
    enrolledAt: new Date(row.createdAt).toISOString(),
  };
  if (includePhoto && row.photo) {
    view.photo = Buffer.from(row.photo).toString('base64');
    view.photoMime = row.photoMime ?? 'application/octet-stream';
  }
  return view;
}

/** Checks that the photo is a decodable JPEG, PNG or WebP and returns its MIME type. */
export async function photoMime(photo: Buffer, maxPixels: number): Promise<string> {
  try {
    const meta = await sharp(photo, { limitInputPixels: maxPixels }).metadata();
    const mime = meta.format ? PHOTO_MIME[meta.format] : undefined;
    if (mime && meta.width && meta.height) return mime;
  } catch {
    // falls through
  }
  throw new AppError('invalid_image', 'The photo must be a decodable JPEG, PNG or WebP image');
}

function isUniqueViolation(e: unknown, column: string): boolean {
  const err = e as { code?: string; constraint?: string; detail?: string };
  return err?.code === '23505' && (String(err.constraint ?? '').includes(column) || String(err.detail ?? '').includes(`(${column})`));
}

const trimOrNull = (v: string | null | undefined) => {
  const t = v?.trim().replace(/\s+/g, ' ');
  return t ? t : null;
};

export class RegistrySimulator {
  constructor(
    private readonly persons: RegistryPersonsRepository,
    private readonly opts: { maxImagePixels: number },
  ) {}

  /**
   * Enrols a new person and issues an unused NIN, BVN or both (retrying on a number collision). A NIN or
   * BVN sent in the input is recorded as sent (409 `conflict` when another person has it), and the person
   * has a number of each kind that was sent or that `issue` names.
   */
  async enrol(input: EnrolInput): Promise<RegistryPersonView> {
    const dob = input.dateOfBirth;
    const dobDate = new Date(`${dob}T00:00:00Z`);
    if (Number.isNaN(dobDate.getTime()) || dobDate.toISOString().slice(0, 10) !== dob) {
      throw new AppError('validation_failed', 'The request is not valid', {
        details: { errors: [{ in: 'fields', path: '/dateOfBirth', message: 'must be a calendar date (YYYY-MM-DD)' }] },
      });
    }
    if (dobDate.getTime() > Date.now() || dobDate.getUTCFullYear() < 1900) {
      throw new AppError('validation_failed', 'The request is not valid', {
        details: { errors: [{ in: 'fields', path: '/dateOfBirth', message: 'must be between 1900-01-01 and today' }] },
      });
    }
    const mime = await photoMime(input.photo, this.opts.maxImagePixels);
    const issue = input.issue ?? 'both';
    const base = {
      firstName: trimOrNull(input.firstName)!,
      lastName: trimOrNull(input.lastName)!,
      middleName: trimOrNull(input.middleName),
      dateOfBirth: dob,
      gender: normaliseGender(input.gender),
      phone: trimOrNull(input.phone),
      photo: input.photo,
      photoMime: mime,
    };
    const given = { nin: input.nin || null, bvn: input.bvn || null };
    for (const kind of ['nin', 'bvn'] as const) {
      if (given[kind] !== null && !NUMBER_PATTERN.test(given[kind]!)) {
        throw new AppError('validation_failed', 'The request is not valid', {
          details: { errors: [{ in: 'fields', path: `/${kind}`, message: 'must be exactly 11 digits' }] },
        });
      }
    }
    for (let attempt = 1; ; attempt++) {
      const numbers = {
        nin: given.nin ?? (issue === 'nin' || issue === 'both' ? randomNumber('nin') : null),
        bvn: given.bvn ?? (issue === 'bvn' || issue === 'both' ? randomNumber('bvn') : null),
      };
      try {
        return toView(await this.persons.insert({ ...base, ...numbers }), false);
      } catch (e) {
        for (const kind of ['nin', 'bvn'] as const) {
          if (given[kind] !== null && isUniqueViolation(e, kind)) throw new AppError('conflict', `Another person is enrolled with this ${kind.toUpperCase()}`);
        }
        const collided = isUniqueViolation(e, 'nin') || isUniqueViolation(e, 'bvn');
        if (!collided || attempt >= MAX_NUMBER_ATTEMPTS) throw e;
      }
    }
  }

  /** One person by NIN or BVN; null when the registry has no such number. */
  async lookup(kind: RegistryKind, number: string, includePhoto: boolean): Promise<RegistryPersonView | null> {
    const row = await this.persons.findByNumber(kind, number, includePhoto);
    return row ? toView(row, includePhoto) : null;
  }

  /**
   * Case-insensitive name search: every whitespace-separated term of `name` must occur in the full name
   * ("first middle last"), so "george bush" and "bush george" both find George Walker Bush. Paged.
   */
  async search(name: string, page: number, pageSize: number) {
    const terms = name.toLowerCase().split(/\s+/).filter(Boolean);
    const { rows, total } = await this.persons.searchByName(terms, page, pageSize);
    return pageOf(
      rows.map((r) => toView(r, false)),
      { page, pageSize },
      total,
    );
  }

  /** Dashboard counts: persons, NINs, BVNs, and enrolments per UTC day over the last `days` days (zeros included). */
  async stats(days = 30) {
    const [totals, perDay] = await Promise.all([this.persons.totals(), this.persons.enrolmentsPerDay(days)]);
    return { persons: totals.persons, nins: totals.nins, bvns: totals.bvns, enrolmentsPerDay: perDay.map((r) => ({ date: r.date, count: r.count })) };
  }

  /** A person already enrolled with this name and date of birth (the seed script's idempotence). */
  async findByNameAndBirth(p: { firstName: string; lastName: string; middleName?: string | null; dateOfBirth: string }) {
    const row = await this.persons.findByNameAndBirth(p);
    return row ? toView(row, false) : null;
  }
}

/** The simulator over a bare knex (the seed script). */
export const registrySimulatorOn = (db: Knex, opts: { maxImagePixels: number }) => new RegistrySimulator(new RegistryPersonsRepository(db), opts);

// ------------------------------------------------------------------------------------------
// Fault injection (SPEC section 9): a hanging or failing registry, for real.
// ------------------------------------------------------------------------------------------

export type Fault = 'none' | 'timeout' | 'error';

/** Longest a simulated hang lasts when the client never gives up. */
export const MAX_HANG_MS = 60_000;

/** The fault of one request: the per-request header (outside production) wins over REGISTRY_SIM_FAULT. */
export function effectiveFault(configured: Fault, header: string | undefined, isProduction: boolean): Fault {
  const h = header?.trim().toLowerCase();
  if (!isProduction && (h === 'timeout' || h === 'error' || h === 'none')) return h;
  return configured;
}

/**
 * Applies a fault: `timeout` waits until `released` fires (the client hung up) or MAX_HANG_MS passes,
 * then answers 500 like `error` does. `none` returns at once.
 */
export async function applyFault(fault: Fault, released: AbortSignal, maxHangMs = MAX_HANG_MS): Promise<void> {
  if (fault === 'none') return;
  if (fault === 'timeout') {
    await new Promise<void>((resolve) => {
      if (released.aborted) return resolve();
      const timer = setTimeout(resolve, maxHangMs);
      timer.unref?.();
      released.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          resolve();
        },
        { once: true },
      );
    });
  }
  throw new AppError('internal_error', `Simulated registry failure (${fault})`);
}
