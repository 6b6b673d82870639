/**
 * Where the request that records an event came from: the client's address and user agent, stamped on
 * every AuditEvent recorded while the request is handled (SPEC 13.3), so that no service has to carry
 * them by hand. The router runs each handler inside `withEventOrigin`; events recorded by workers,
 * scripts and timers have no origin (both columns null).
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface EventOrigin {
  ip: string | null;
  userAgent: string | null;
}

const origins = new AsyncLocalStorage<EventOrigin>();

/** The longest user agent kept: enough to tell browsers and tools apart, bounded against abuse. */
export const USER_AGENT_MAX = 256;

export function withEventOrigin<T>(origin: EventOrigin, fn: () => Promise<T>): Promise<T> {
  const userAgent = origin.userAgent?.replace(/[\u0000-\u001f\u007f]/g, '').slice(0, USER_AGENT_MAX) || null;
  return origins.run({ ip: origin.ip || null, userAgent }, fn);
}

/** The origin of the request being handled, if any. */
export function eventOrigin(): EventOrigin | undefined {
  return origins.getStore();
}
