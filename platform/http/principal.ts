/**
 * Who is calling: the principal a route's handler acts for, as the authoriser establishes it from the
 * bearer token and the current state in PostgreSQL (features/sign-in/authorization-service.ts).
 */

/** A consumer, signed in with a live session. */
export interface ConsumerPrincipal {
  kind: 'consumer';
  userId: string;
  sessionId: string;
}

/** An active operator or administrator, signed in with a live session. */
export interface OperatorPrincipal {
  kind: 'operator';
  operatorId: string;
  role: 'operator' | 'administrator';
  orgId: string;
  sessionId: string;
  mustResetPassword: boolean;
}

/** An operator whose role is administrator (what an `administrator` route receives). */
export interface AdministratorPrincipal extends OperatorPrincipal {
  role: 'administrator';
}

export type Principal = ConsumerPrincipal | OperatorPrincipal;

export function bearerToken(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer\s+([A-Za-z0-9\-_.~+/]+=*)\s*$/i.exec(header);
  return m ? m[1]! : null;
}

/**
 * Who the access log line names (platform/http/middleware/request-context.ts): the principal's type,
 * id and session, never a phone or a name.
 */
export interface AccessSubject {
  subjectType: 'consumer' | 'operator';
  subjectId: string;
  sessionId: string;
}

export function accessSubject(p: Principal): AccessSubject {
  return p.kind === 'consumer'
    ? { subjectType: 'consumer', subjectId: p.userId, sessionId: p.sessionId }
    : { subjectType: 'operator', subjectId: p.operatorId, sessionId: p.sessionId };
}
