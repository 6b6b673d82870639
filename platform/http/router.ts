/**
 * Builds the Koa router from the route table. For each route, in order:
 *   1. the bearer token's signature, expiry and audience (stateless: no dependency is touched);
 *   2. the authorisation rule against current state (session, user, operator in PostgreSQL), so a
 *      refused caller gets its 401/403 before its body is read;
 *   3. the body (JSON or multipart) parsed and every part validated against the route's schemas;
 *   4. the handler.
 * A route with a `precheck` runs it on the raw parsed parts after step 3's parsing (on no parts when
 * the body is not of the route's content type), before the validation answers; with
 * `precheckBeforeState` (/identify's attestation, which must answer before ANY dependency is called)
 * step 2 waits until after it. A route with `outcomeInErrors` echoes the error
 * code as `outcome` in every error body.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import { jsonBody, multipartBody, uploadedFiles } from './middleware/body.js';
import { koaPath, type AnyRoute, type RouteAuthorizer, type UploadedFile } from './route-table.js';
import { check, validationError, type Violation } from './validation.js';
import { withEventOrigin } from '../events/origin.js';
import { accessSubject } from './principal.js';
import { clientIp } from './client-address.js';

export interface RouterDeps {
  config: Config;
  authorizer: RouteAuthorizer<any>;
}

/** Adds `outcome` (the error code) to an error of a route with distinct outcomes, unless it carries one. */
async function echoOutcome(_ctx: Context, next: () => Promise<unknown>): Promise<void> {
  try {
    await next();
  } catch (e) {
    if (!(e instanceof AppError) || e.extra?.outcome !== undefined) throw e;
    throw new AppError(e.code, e.message, { details: e.details, extra: { ...e.extra, outcome: e.code }, retryAfter: e.retryAfter, cause: e });
  }
}

export function buildRouter(routes: AnyRoute[], deps: RouterDeps): Router {
  const router = new Router();
  const seen = new Set<string>();
  for (const r of routes) {
    const key = `${r.method} ${r.path}`;
    if (seen.has(key)) throw new Error(`Route declared twice: ${key}`);
    seen.add(key);
    // The parser admits as many file parts as the route's fields can hold (a repeated field: its most).
    const maxFiles = r.multipart ? Object.values(r.multipart.files).reduce((n, f) => n + (f.repeat?.max ?? 1), 0) : 0;
    const parseBody = r.multipart ? multipartBody(deps.config.http.maxUploadBytes, maxFiles) : r.body ? jsonBody() : null;

    router.register(
      koaPath(r.path),
      [r.method],
      [
        ...(r.outcomeInErrors ? [echoOutcome] : []),
        async (ctx: Context) => {
          ctx.state.routeTemplate = r.path;
          const params: Record<string, string> = { ...(ctx.params as Record<string, string>) };

          // 1. Stateless token check first: an anonymous or foreign-audience caller learns nothing more.
          const claims = await deps.authorizer.verify(ctx.get('authorization') || undefined, r.auth, params);

          const authorize = () => deps.authorizer.current(claims, r.auth);
          // 2. Current state, before the body, unless a precheck must answer before any dependency.
          let auth = r.precheck && r.precheckBeforeState ? null : await authorize();

          // 3. Body and validation of every part.
          let unreadable: AppError | undefined;
          if (parseBody) {
            try {
              await parseBody(ctx, async () => {});
            } catch (e) {
              // Not of the route's content type at all (e.g. /identify without a multipart body): there are no
              // parts, and a precheck judges that first (400 `attestation_required`); else the 415 stands.
              if (!(r.precheck && e instanceof AppError && e.code === 'unsupported_media_type')) throw e;
              unreadable = e;
            }
          }
          const violations: Violation[] = [];
          const query: Record<string, unknown> = { ...ctx.query };
          if (r.params) violations.push(...check(r.params, 'params', params));
          if (r.query) violations.push(...check(r.query, 'query', query));
          else if (Object.keys(query).length)
            violations.push(...Object.keys(query).map((k) => ({ in: 'query' as const, path: `/${k}`, message: 'is not an accepted parameter' })));
          let body: unknown = undefined;
          if (r.body) {
            body = ctx.request.body ?? {};
            violations.push(...check(r.body, 'body', body));
          }
          const fields: Record<string, unknown> = {};
          const files: Record<string, UploadedFile | undefined> = {};
          const fileLists: Record<string, UploadedFile[]> = {};
          if (r.multipart) {
            const rawFields = (ctx.request.body ?? {}) as Record<string, unknown>;
            for (const [k, v] of Object.entries(rawFields)) {
              if (Array.isArray(v)) violations.push({ in: 'fields', path: `/${k}`, message: 'must be sent once' });
              else fields[k] = v;
            }
            violations.push(...check(r.multipart.fields, 'fields', fields));
            const uploads = uploadedFiles(ctx);
            for (const [name, list] of Object.entries(uploads)) {
              const spec = r.multipart.files[name];
              if (!spec) violations.push({ in: 'fields', path: `/${name}`, message: 'is not an accepted file field' });
              else if (spec.repeat && (list.length < spec.repeat.min || list.length > spec.repeat.max))
                violations.push({ in: 'fields', path: `/${name}`, message: `must be sent ${spec.repeat.min} to ${spec.repeat.max} times` });
              else if (!spec.repeat && list.length > 1) violations.push({ in: 'fields', path: `/${name}`, message: 'must be sent once' });
              else {
                files[name] = list[0];
                fileLists[name] = list;
              }
            }
            for (const [name, spec] of Object.entries(r.multipart.files)) {
              const required = typeof spec.required === 'function' ? spec.required(fields) : spec.required;
              if (required && !files[name]) violations.push({ in: 'fields', path: `/${name}`, message: 'is required (a file part)' });
            }
          }
          const input = {
            body,
            query,
            params,
            fields,
            files,
            fileLists,
            ip: clientIp(ctx, deps.config.http.trustProxy),
            requestId: String(ctx.state.requestId),
            userAgent: ctx.get('user-agent') || null,
            ctx,
          };

          // A precheck answers before anything touches a dependency (raw, unvalidated parts).
          if (r.precheck) await r.precheck(input);
          if (unreadable) throw unreadable;
          if (violations.length) throw validationError(violations);
          // The principal the route's rule admitted (none for `none`), as route() typed the handler's `auth`.
          if (auth === null) auth = await authorize();
          if (auth) ctx.state.accessSubject = accessSubject(auth);

          // 4. The handler, with the request's origin stamped on every event it records.
          const admitted = auth;
          const out = await withEventOrigin({ ip: input.ip, userAgent: input.userAgent }, () => r.handler({ ...input, auth: admitted }));
          if (out) {
            if (out.headers) for (const [h, v] of Object.entries(out.headers)) ctx.set(h, v);
            ctx.status = out.status ?? 200;
            if (out.body !== undefined) ctx.body = out.body;
            else if (ctx.status !== 204) ctx.body = {};
          }
        },
      ],
    );
  }
  return router;
}
