/** Time the liveness challenge gives a person to reach each pose before its frame is taken (ms). */
export const STEP_MS = 2000;
