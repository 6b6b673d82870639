/**
 * AJV validation of every request part. Bodies and multipart fields are validated as sent (no type
 * coercion, unknown keys rejected where the schema says so); query strings and path parameters are
 * strings on the wire, so they are coerced to the schema's types and given its defaults.
 */
import type { TSchema } from '@sinclair/typebox';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { AppError } from '../shared/errors.js';

export type RequestPart = 'body' | 'query' | 'params' | 'fields';

function makeAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({ allErrors: true, strict: false, coerceTypes: coerce, useDefaults: true, removeAdditional: false });
  (addFormats as unknown as (a: Ajv) => void)(ajv);
  return ajv;
}

const asSent = makeAjv(false);
const coerced = makeAjv(true);
const cache = new WeakMap<TSchema, ValidateFunction>();

function compile(schema: TSchema, part: RequestPart): ValidateFunction {
  let fn = cache.get(schema);
  if (!fn) {
    fn = (part === 'query' || part === 'params' ? coerced : asSent).compile(schema);
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
