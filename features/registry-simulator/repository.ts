/**
 * The registry simulator's persons (`registry_persons`). Only the simulator reads this table: the
 * service proper reaches the registry over HTTP, as it would a real one.
 */
import type { Knex } from 'knex';
import { RegistryPerson } from '../../models/index.js';
import { Repository } from '../../platform/database/unit-of-work.js';
import { onePage } from '../../platform/lists/paging.js';

export type RegistryKind = 'nin' | 'bvn';

export type PersonRow = Pick<
  RegistryPerson,
  'id' | 'nin' | 'bvn' | 'firstName' | 'lastName' | 'middleName' | 'dateOfBirth' | 'gender' | 'phone' | 'createdAt'
> &
  Partial<Pick<RegistryPerson, 'photo' | 'photoMime'>>;

const PUBLIC_COLUMNS = ['id', 'nin', 'bvn', 'firstName', 'lastName', 'middleName', 'dateOfBirth', 'gender', 'phone', 'createdAt'] as const;
const TABLE = RegistryPerson.tableName;
const FULL_NAME_SQL = "lower(concat_ws(' ', first_name, middle_name, last_name))";

export class RegistryPersonsRepository extends Repository {
  /** Inserts a person; a NIN or BVN already enrolled is a unique violation naming the column. */
  async insert(
    person: Pick<RegistryPerson, 'nin' | 'bvn' | 'firstName' | 'lastName' | 'middleName' | 'dateOfBirth' | 'gender' | 'phone' | 'photo' | 'photoMime'>,
  ): Promise<PersonRow> {
    const [row] = await this.db(TABLE)
      .insert(person)
      .returning([...PUBLIC_COLUMNS]);
    return row;
  }

  async findByNumber(kind: RegistryKind, number: string, includePhoto: boolean): Promise<PersonRow | undefined> {
    const columns: string[] = [...PUBLIC_COLUMNS];
    if (includePhoto) columns.push('photo', 'photoMime');
    return this.db(TABLE).where(kind, number).first(columns);
  }

  /** Persons whose full name ("first middle last", any case) contains every term; paged by name. */
  async searchByName(terms: string[], page: number, pageSize: number): Promise<{ rows: PersonRow[]; total: number }> {
    const where = (q: Knex.QueryBuilder) => {
      for (const term of terms) {
        const escaped = term.replace(/[\\%_]/g, (c) => `\\${c}`);
        q.whereRaw(`${FULL_NAME_SQL} LIKE ? ESCAPE '\\'`, [`%${escaped}%`]);
      }
      return q;
    };
    const [{ count }] = (await where(this.db(TABLE)).count({ count: '*' })) as [{ count: string | number }];
    const rows = await where(this.db(TABLE))
      .select([...PUBLIC_COLUMNS])
      .orderBy([{ column: 'lastName' }, { column: 'firstName' }, { column: 'createdAt' }, { column: 'id' }])
      .modify(onePage, { page, pageSize });
    return { rows, total: Number(count) };
  }

  async totals(): Promise<{ persons: number; nins: number; bvns: number }> {
    const db = this.db;
    return db(TABLE).first(db.raw('count(*)::int AS persons'), db.raw('count(nin)::int AS nins'), db.raw('count(bvn)::int AS bvns'));
  }

  /** Enrolments per UTC day over the last `days` days, zeros included, oldest first. */
  async enrolmentsPerDay(days: number): Promise<{ date: string; count: number }[]> {
    const { rows } = (await this.db.raw(
      `SELECT to_char(d.day, 'YYYY-MM-DD') AS date, count(p.id)::int AS count
         FROM generate_series((now() AT TIME ZONE 'UTC')::date - (?::int - 1), (now() AT TIME ZONE 'UTC')::date, interval '1 day') AS d(day)
         LEFT JOIN ${TABLE} p ON (p.created_at AT TIME ZONE 'UTC')::date = d.day::date
        GROUP BY d.day ORDER BY d.day`,
      [days],
    )) as { rows: { date: string; count: number }[] };
    return rows;
  }

  /** A person with this name (any case) and date of birth. */
  async findByNameAndBirth(p: { firstName: string; lastName: string; middleName?: string | null; dateOfBirth: string }): Promise<PersonRow | undefined> {
    return this.db(TABLE)
      .whereRaw('lower(first_name) = lower(?)', [p.firstName.trim()])
      .whereRaw('lower(last_name) = lower(?)', [p.lastName.trim()])
      .whereRaw("lower(coalesce(middle_name, '')) = lower(?)", [p.middleName?.trim() ?? ''])
      .where('dateOfBirth', p.dateOfBirth)
      .first([...PUBLIC_COLUMNS]);
  }
}
