/**
 * AJV validation of every request part. Bodies and multipart fields are validated as sent (no type
 * coercion, unknown keys rejected where the schema says so); query strings and path parameters are
 * strings on the wire, so they are coerced to the schema's types and given its defaults.
 *
 * Text PostgreSQL cannot store is refused here, for every string of every request schema: a string
 * holding NUL (U+0000: PostgreSQL's text types refuse it, the query fails) or an unpaired UTF-16
 * surrogate (JSON allows `"\ud800"`; it cannot be encoded as UTF-8 and would be stored altered) is
 * 400 `validation_failed`, like any other schema violation. It is added to each `type: "string"` node
 * when the schema is compiled (see `storableStrings`), so a new route gets it without asking.
 */
import type { TSchema } from '@sinclair/typebox';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { AppError } from '../errors.js';

export type RequestPart = 'body' | 'query' | 'params' | 'fields';

export const STORABLE_TEXT_KEYWORD = 'x-storable-text';
export const STORABLE_TEXT_MESSAGE = 'must not contain NUL (U+0000) or unpaired surrogates';

/** True when PostgreSQL can store the string as it is: no NUL, well-formed UTF-16 (so valid UTF-8). */
export function isStorableText(value: string): boolean {
  return !value.includes('\u0000') && (value as string & { isWellFormed(): boolean }).isWellFormed();
}

function makeAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({ allErrors: true, strict: false, coerceTypes: coerce, useDefaults: true, removeAdditional: false });
  (addFormats as unknown as (a: Ajv) => void)(ajv);
  ajv.addKeyword({
    keyword: STORABLE_TEXT_KEYWORD,
    type: 'string',
    schemaType: 'boolean',
    error: { message: STORABLE_TEXT_MESSAGE },
    validate: (on: boolean, data: string) => !on || isStorableText(data),
  });
  return ajv;
}

/**
 * A copy of a schema (plain JSON: TypeBox's symbols and `$id`s dropped) with the storable-text rule on
 * every node that accepts a string.
 */
function storableStrings(schema: TSchema): Record<string, unknown> {
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk);
    if (!node || typeof node !== 'object') return node;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node)) if (k !== '$id') out[k] = walk(v);
    const type = out.type;
    if (type === 'string' || (Array.isArray(type) && type.includes('string'))) out[STORABLE_TEXT_KEYWORD] = true;
    return out;
  };
  return walk(JSON.parse(JSON.stringify(schema))) as Record<string, unknown>;
}

const asSent = makeAjv(false);
const coerced = makeAjv(true);
const cache = new WeakMap<TSchema, ValidateFunction>();

function compile(schema: TSchema, part: RequestPart): ValidateFunction {
  let fn = cache.get(schema);
  if (!fn) {
    fn = (part === 'query' || part === 'params' ? coerced : asSent).compile(storableStrings(schema));
    cache.set(schema, fn);
  }
  return fn;
}

export interface Violation {
  in: RequestPart;
  path: string;
  message: string;
}

function describe(part: RequestPart, e: ErrorObject): Violation {
  let path = e.instancePath || '';
  let message = e.message ?? 'is invalid';
  if (e.keyword === 'additionalProperties') {
    path = `${path}/${(e.params as { additionalProperty: string }).additionalProperty}`;
    message = 'is not an accepted field';
  } else if (e.keyword === 'required') {
    path = `${path}/${(e.params as { missingProperty: string }).missingProperty}`;
    message = 'is required';
  }
  return { in: part, path: path || '/', message };
}

/** Validates (and, for query/params, coerces in place) one request part; returns its violations. */
export function check(schema: TSchema, part: RequestPart, value: unknown): Violation[] {
  const fn = compile(schema, part);
  if (fn(value)) return [];
  return (fn.errors ?? []).map((e) => describe(part, e));
}

export function validationError(violations: Violation[]): AppError {
  return new AppError('validation_failed', 'The request is not valid', { details: { errors: violations } });
}
