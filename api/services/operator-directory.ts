/**
 * The administrators' directory of operators (GET /operators, GET /operators/{id}): reads only.
 * Kept apart from operator-service.ts (which changes accounts) so that the repository refactor of
 * issue 9 can move these queries behind an operator repository without touching the write paths.
 */
import type { Knex } from 'knex';
import { AppError } from '../../shared/errors.js';
import { Operator } from '../../models/index.js';
import type { PublicOperator } from './operator-service.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface OperatorFilter {
  page: number;
  pageSize: number;
  role?: 'operator' | 'administrator';
  status?: 'active' | 'deactivated';
  /** Substring of the identifier or the display name, case-insensitive. */
  q?: string;
}

const toPublic = (row: Record<string, unknown>) => (Operator.fromDatabaseJson(row) as Operator).toPublic();

/** LIKE treats `%`, `_` and `\` specially: a search for "a_b" means those three characters. */
const likeEscape = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

export async function listOperators(db: Knex, f: OperatorFilter): Promise<{ items: PublicOperator[]; page: number; pageSize: number; total: number }> {
  const base = () => {
    const qb = db('operators');
    if (f.role) qb.where({ role: f.role });
    if (f.status) qb.where({ status: f.status });
    if (f.q) {
      const pattern = `%${likeEscape(f.q)}%`;
      qb.where((w) => w.whereILike('identifier', pattern).orWhereILike('displayName', pattern));
    }
    return qb;
  };
  const [rows, [{ total }]] = await Promise.all([
    base()
      .select('*')
      .orderBy([{ column: 'createdAt', order: 'desc' }, { column: 'id', order: 'desc' }])
      .limit(f.pageSize)
      .offset((f.page - 1) * f.pageSize),
    base().count({ total: '*' }),
  ]);
  return { items: rows.map(toPublic), page: f.page, pageSize: f.pageSize, total: Number(total) };
}

export async function findOperator(db: Knex, id: string): Promise<PublicOperator> {
  const row = UUID.test(id) ? await db('operators').where({ id }).first() : undefined;
  if (!row) throw new AppError('not_found', 'Operator not found');
  return toPublic(row);
}
