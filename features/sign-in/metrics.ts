/** The sign-in wing's metrics, declared here and created on each process's registry (platform/metrics.ts). */
import { counterSpec } from '../../platform/metrics.js';

export const SIGN_IN_METRICS = {
  operatorLocks: counterSpec({
    name: 'operator_locks_total',
    help: 'Staff accounts locked by failed sign-ins, by role (operator, administrator) and kind: lapsing (an administrator, for a window) or until_reset',
    labelNames: ['role', 'kind'],
    zero: ['operator', 'administrator'].flatMap((role) => ['lapsing', 'until_reset'].map((kind) => ({ role, kind }))),
  }),
};
