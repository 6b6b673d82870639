/**
 * A route is data: method, path, authorisation rule, request schemas, documented responses and a
 * handler. The router (platform/http/router.ts), the OpenAPI document (platform/http/openapi.ts) and the authorisation
 * matrix test are all generated from the same table, so a route cannot exist without its schema and rule.
 */
import type { Static, TObject, TSchema } from '@sinclair/typebox';
import type { Context } from 'koa';
import type { ErrorCode } from '../errors.js';
import type { AdministratorPrincipal, ConsumerPrincipal, OperatorPrincipal, Principal } from './principal.js';

/**
 * Who may call a route.
 * - `none`: anyone.
 * - `consumer`: a consumer access token of a live user.
 * - `consumer:self`: a consumer whose subject equals the `{id}` path parameter (else 403 `forbidden`).
 * - `operator`: an active operator or administrator whose password is not flagged for reset.
 * - `operator:flagged-ok`: the same, but a flagged operator is accepted (set-password only).
 * - `operator:mfa-setup`: like `operator`, but accepted without a second factor under STAFF_MFA=required
 *   (mfa/setup and mfa/confirm only; set-password's rule accepts that too).
 * - `administrator`: an active, unflagged administrator.
 * - `consumer-or-operator`: a consumer as under `consumer`, or an operator as under `operator`.
 */
export type AuthRule =
  'none' | 'consumer' | 'consumer:self' | 'operator' | 'operator:flagged-ok' | 'operator:mfa-setup' | 'administrator' | 'consumer-or-operator';

/**
 * The principal a route's handler receives, fixed by its auth rule: the router hands it over only after
 * the authoriser admitted the caller under that rule, so a handler has nothing left to check or narrow.
 */
export type PrincipalOf<A extends AuthRule> = A extends 'consumer' | 'consumer:self'
  ? ConsumerPrincipal
  : A extends 'administrator'
    ? AdministratorPrincipal
    : A extends 'operator' | 'operator:flagged-ok' | 'operator:mfa-setup'
      ? OperatorPrincipal
      : A extends 'consumer-or-operator'
        ? Principal
        : undefined;

export interface UploadedFile {
  field: string;
  filename: string | null;
  mimetype: string | null;
  size: number;
  data: Buffer;
}

export interface MultipartSpec<F extends TObject> {
  /** Text fields (always strings); validated strictly like a body. */
  fields: F;
  /** File parts by field name; `required` may depend on the text fields (verify-face's reuseCapture). */
  files: Record<
    string,
    {
      required: boolean | ((fields: Record<string, unknown>) => boolean);
      description: string;
      /**
       * The part may be sent this many times (in order; the handler reads them all in `fileLists`);
       * without it a file field is sent once.
       */
      repeat?: { min: number; max: number };
    }
  >;
}

export interface ResponseSpec {
  description: string;
  schema?: TSchema;
  /** Defaults to application/json. */
  contentType?: string;
}

/** What a request brings, validated (a precheck sees it raw, before the caller's state is read). */
export interface RequestInput<B, Q, P, F> {
  body: B;
  query: Q;
  params: P;
  fields: F;
  files: Record<string, UploadedFile | undefined>;
  /** Every part of each file field, in the order sent (one item for a field without `repeat`). */
  fileLists: Record<string, UploadedFile[]>;
  ip: string;
  requestId: string;
  userAgent: string | null;
  ctx: Context;
}

/** What a handler receives: the request, and the principal its route's auth rule admitted. */
export interface HandlerInput<B, Q, P, F, A extends AuthRule = AuthRule> extends RequestInput<B, Q, P, F> {
  auth: PrincipalOf<A>;
}

/** The headers of an answer no cache may keep (tokens, a temporary password). */
export const NO_STORE = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };

export interface HandlerOutput {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
}

// Guards keep TypeScript from expanding Static<TSchema> (infinitely deep) while it infers a route's types.
type Infer<S> = 0 extends 1 & S
  ? any
  : [S] extends [undefined]
    ? Record<string, never>
    : [TSchema] extends [S]
      ? unknown
      : S extends TSchema
        ? Static<S>
        : never;

export interface RouteSpec<
  B extends TSchema | undefined = undefined,
  Q extends TSchema | undefined = undefined,
  P extends TSchema | undefined = undefined,
  F extends TObject | undefined = undefined,
  A extends AuthRule = AuthRule,
> {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** OpenAPI style: `/users/{id}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  auth: A;
  body?: B;
  query?: Q;
  params?: P;
  multipart?: F extends TObject ? MultipartSpec<F> : never;
  /** Success responses by status. */
  responses: Record<number, ResponseSpec>;
  /** Error codes this route documents (the error envelope is shared). */
  errors?: ErrorCode[];
  /**
   * Runs on the raw parsed parts, before validation and the stateful authorisation check: no dependency may be called.
   * A request that is not of the route's content type at all has no parts: the precheck judges them first, then 415.
   */
  /**
   * Run the precheck before the caller's current state is read (and so after the body is parsed): only
   * for a check the contract puts before every dependency (/identify's attestation). Otherwise a
   * revoked session or a deactivated account is refused before its body is read.
   */
  precheckBeforeState?: boolean;
  precheck?: (input: NoInfer<RequestInput<Infer<B>, Infer<Q>, Infer<P>, Infer<F>>>) => void | Promise<void>;
  /**
   * Every error body of this route also carries `outcome` (the error code, unless a face outcome set it): the
   * interface document's "endpoints with distinct outcomes (verify-face, /identify, /verify/self) also echo
   * the code as outcome in the body".
   */
  outcomeInErrors?: boolean;
  /** Hidden from the OpenAPI document (e.g. the Bull Board UI). */
  hidden?: boolean;
  handler: (input: NoInfer<HandlerInput<Infer<B>, Infer<Q>, Infer<P>, Infer<F>, A>>) => Promise<HandlerOutput | void>;
}

// The table holds routes of many shapes; the router treats inputs as already validated.
export type AnyRoute = RouteSpec<any, any, any, any, AuthRule>;

/** Declares one route with its input types inferred from its schemas and its principal from its auth rule. */
export function route<
  B extends TSchema | undefined = undefined,
  Q extends TSchema | undefined = undefined,
  P extends TSchema | undefined = undefined,
  F extends TObject | undefined = undefined,
  A extends AuthRule = AuthRule,
>(spec: RouteSpec<B, Q, P, F, A>): AnyRoute {
  return spec as unknown as AnyRoute;
}

export const koaPath = (openapiPath: string) => openapiPath.replace(/\{(\w+)\}/g, ':$1');

/**
 * What the router asks of the authoriser (features/sign-in/authorization-service.ts implements it):
 * the stateless check of the bearer token for a rule, then the principal from the current state.
 */
export interface RouteAuthorizer<Claims = unknown> {
  verify(authorization: string | undefined, rule: AuthRule, params: Record<string, string>): Promise<Claims | null>;
  current(claims: Claims | null, rule: AuthRule): Promise<Principal | undefined>;
}
