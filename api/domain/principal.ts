/**
 * Who is calling: the principal a route's handler acts for, as the authoriser establishes it from the
 * bearer token and the current state in PostgreSQL (api/services/authorization-service.ts).
 */

export type AuthContext =
  | { kind: 'anonymous' }
  | { kind: 'consumer'; userId: string; sessionId: string }
  | {
      kind: 'operator';
      operatorId: string;
      role: 'operator' | 'administrator';
      orgId: string;
      sessionId: string;
      mustResetPassword: boolean;
    };

export type ConsumerAuth = Extract<AuthContext, { kind: 'consumer' }>;
export type OperatorAuth = Extract<AuthContext, { kind: 'operator' }>;

export function bearerToken(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer\s+([A-Za-z0-9\-_.~+/]+=*)\s*$/i.exec(header);
  return m ? m[1]! : null;
}
