/**
 * The data this wing keeps, declared to the retention registry (platform/retention/README.md): a
 * consumer's liveness sessions in Redis (a passed one holds its frontal frame, sealed) and their hourly
 * count, each expiring on its own within minutes or an hour, and erased with the account. The frame
 * digests hold nothing of anyone without the key ring (keyed HMACs of bytes): they are not erased,
 * only expired (LIVENESS_REPLAY_WINDOW_SECONDS), so that a deleted account's frames stay refused; so are
 * the keyed digests of the faces' sketch bands where the near-copy check is on
 * (LIVENESS_NEAR_REPLAY_WINDOW_SECONDS).
 */
import type { DataFamily } from '../../platform/retention/registry.js';
import type { LivenessSessionStore } from './session-store.js';

export function livenessDataFamilies(store: Pick<LivenessSessionStore, 'purgeUser'>): DataFamily[] {
  return [
    {
      name: 'livenessSessions',
      store: 'redis liveness:session:*, liveness:owned:*, liveness:rate:*',
      erasure: {
        phase: 'after-commit',
        removes: "the consumer's liveness sessions (with a passed one's sealed frontal frame) and their hourly count",
        erase: async ({ userId }) => {
          await store.purgeUser(userId);
        },
      },
    },
  ];
}
