/**
 * Principals for tests that are not about signing in: real rows and real sessions in the test
 * database, with access tokens from the real token service. (The sign-in flows have their own tests.)
 */
import type { Harness } from './harness.js';

let counter = 0;
const uniquePhone = () => `+234803${String(Date.now() % 1e4).padStart(4, '0')}${String(++counter % 1000).padStart(3, '0')}`;

export async function newConsumer(h: Harness, fields: { phone?: string } = {}): Promise<{ userId: string; token: string; sessionId: string }> {
  const [user] = await h.deps
    .db('users')
    .insert({ phone: fields.phone ?? uniquePhone() })
    .returning('id');
  const [session] = await h.deps.db('sessions').insert({ subjectType: 'consumer', subjectId: user.id }).returning('id');
  const { token } = await h.deps.tokens.signAccess({ sub: user.id, aud: 'consumer', sid: session.id });
  return { userId: user.id, token, sessionId: session.id };
}

export async function newOperator(
  h: Harness,
  opts: { role?: 'operator' | 'administrator'; mustResetPassword?: boolean; status?: 'active' | 'deactivated'; orgId?: string } = {},
): Promise<{ operatorId: string; token: string; sessionId: string }> {
  const [op] = await h.deps
    .db('operators')
    .insert({
      identifier: `op-${Date.now()}-${++counter}`,
      displayName: 'Test Operator',
      role: opts.role ?? 'operator',
      status: opts.status ?? 'active',
      mustResetPassword: opts.mustResetPassword ?? false,
      passwordHash: 'not-a-login-account',
      orgId: opts.orgId ?? 'default',
    })
    .returning('id');
  const [session] = await h.deps.db('sessions').insert({ subjectType: 'operator', subjectId: op.id }).returning('id');
  const { token } = await h.deps.tokens.signAccess({ sub: op.id, aud: 'operator', sid: session.id });
  return { operatorId: op.id, token, sessionId: session.id };
}
