/**
 * The data this wing keeps, declared to the retention registry (platform/retention/README.md): the
 * Redis copies of an identity check (the reusable capture, the validations with their registry photo,
 * the link tokens), each with its own short TTL, and erased with the account.
 */
import type { DataFamily } from '../../platform/retention/registry.js';
import type { IdentityTokenStore } from './identity-tokens.js';

export function identityDataFamilies(store: Pick<IdentityTokenStore, 'purgeUser'>): DataFamily[] {
  return [
    {
      name: 'identityTokens',
      store: 'redis identity:*',
      // No age rule of the sweep's: every key expires by its own TTL.
      erasure: {
        phase: 'after-commit',
        removes: 'the reusable capture, the current validations with their registry photo, the link tokens',
        erase: async ({ userId }) => {
          await store.purgeUser(userId);
        },
      },
    },
  ];
}
