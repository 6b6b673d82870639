/**
 * The data this wing keeps, declared to the retention registry (platform/retention/README.md): the
 * user's biometric failure count and lock in Redis (TTL-bound), erased with the account. The canonical
 * embedding itself is removed by the DELETE's own transaction (features/accounts/user-service.ts),
 * which orders it last for the change log.
 */
import type { DataFamily } from '../../platform/retention/registry.js';
import type { BiometricAttemptsStore } from './biometric-attempts-store.js';

export function faceDataFamilies(attempts: Pick<BiometricAttemptsStore, 'purgeUser'>): DataFamily[] {
  return [
    {
      name: 'biometricAttempts',
      store: 'redis biometric:attempts:*',
      erasure: {
        phase: 'after-commit',
        removes: 'the failure count, the lock and any in-flight claim',
        erase: async ({ userId }) => {
          await attempts.purgeUser(userId);
        },
      },
    },
  ];
}
