import test from 'ava';
import { lightJobRuns } from '../../platform/jobs/light.js';

test('light frames are cut into jobs of at most LIVENESS_LIGHT_JOB_FRAMES, of even sizes, in order', (t) => {
  t.deepEqual(lightJobRuns(8, 4), [
    [0, 4],
    [4, 8],
  ]);
  t.deepEqual(lightJobRuns(7, 4), [
    [0, 4],
    [4, 7],
  ]);
  t.deepEqual(lightJobRuns(6, 4), [
    [0, 3],
    [3, 6],
  ]);
  t.deepEqual(lightJobRuns(6, 8), [[0, 6]]);
  t.deepEqual(lightJobRuns(8, 3), [
    [0, 3],
    [3, 5],
    [5, 8],
  ]);
  t.deepEqual(lightJobRuns(0, 4), []);
  // Every frame in exactly one job, none larger than asked, sizes within one of each other.
  for (let count = 1; count <= 16; count++)
    for (let perJob = 1; perJob <= 9; perJob++) {
      const runs = lightJobRuns(count, perJob);
      t.deepEqual(
        runs.flatMap(([a, b]) => Array.from({ length: b - a }, (_, i) => a + i)),
        Array.from({ length: count }, (_, i) => i),
      );
      const sizes = runs.map(([a, b]) => b - a);
      t.true(Math.max(...sizes) <= perJob && Math.max(...sizes) - Math.min(...sizes) <= 1 && runs.length === Math.ceil(count / perJob));
    }
  t.throws(() => lightJobRuns(8, 0), { instanceOf: RangeError });
});
