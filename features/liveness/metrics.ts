/** The liveness wing's metrics, listed by its manifest (platform/metrics.ts creates them). */
import { gaugeSpec } from '../../platform/metrics.js';

export const LIVENESS_METRICS = {
  /** The LIVENESS_MODE in force: 1 for it, 0 for the other (an alert reads `faceid_liveness_mode{mode="passive"} == 1` in production). */
  mode: gaugeSpec({
    name: 'faceid_liveness_mode',
    help: 'The LIVENESS_MODE in force (1) and the other (0): passive accepts a single capture, challenge requires a liveness session',
    labelNames: ['mode'],
  }),
};
