/** What the tests of the face path's failures share: an attested /identify with a fixture photo, timed, and what a queue still holds. */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { QueueName } from '../../platform/jobs/index.js';
import { ROOT, type Harness } from './harness.js';
import { client } from './http.js';

/** POST /identify as `token` with an attested PNG fixture (Bush_1 unless named); the answer and how long it took. */
export async function identifyWithFixture(h: Harness, token: string, fixture = 'test/fixtures/faces/lfw/Bush_1.png') {
  const started = Date.now();
  const res = await client(h.url).post('/identify', {
    token,
    form: { attestation: 'true', file: { data: readFileSync(path.join(ROOT, fixture)), filename: 'p.png', type: 'image/png' } },
  });
  return { res, elapsed: Date.now() - started };
}

/** The jobs a queue still holds for a worker to take: waiting, active, delayed and prioritized. */
export async function jobsLeft(h: Harness, queue: QueueName): Promise<number> {
  const counts = await h.deps.jobs.counts(queue);
  return (counts.waiting ?? 0) + (counts.active ?? 0) + (counts.delayed ?? 0) + (counts.prioritized ?? 0);
}
