/**
 * The NIN link through the whole service, as a consumer does it (part of `npm run bench -- face-path`):
 * POST /identity/nin/validate (the registry simulator's record and photo), POST
 * /identity/nin/verify-face with a live selfie (the live capture's chain and the registry photo's
 * stages, compared), POST /identity/nin/link (the duplicate search, the link row, the canonical
 * template). One client, one link at a time; each link is a fresh consumer and a fresh registry person
 * (a number links once, a consumer links one NIN). Between two links, outside the timing, the linked
 * template is removed (through the change log, as an erasure does), so that the next link of the same
 * face is not a duplicate of the previous one: every link measured is a first link.
 *
 * Kept apart from bench/face-path.ts so that an older tree measured for comparison can run it as is.
 */
import { performance } from 'node:perf_hooks';
import type { AppDeps } from '../processes/web/deps.js';
import { summarise } from './lib.js';

type Summary = ReturnType<typeof summarise>;

export interface LinkFigures {
  /** validate + verify-face + link, wall ms. */
  wall: Summary;
  validate: Summary;
  verifyFace: Summary;
  link: Summary;
}

async function call(url: string, token: string, body: FormData | object): Promise<{ status: number; body: Record<string, unknown>; ms: number }> {
  const t = performance.now();
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, ...(body instanceof FormData ? {} : { 'content-type': 'application/json' }) },
    body: body instanceof FormData ? body : JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  return { status: res.status, body: json, ms: performance.now() - t };
}

export async function benchLink(opts: {
  webUrl: string;
  deps: Pick<AppDeps, 'db' | 'tokens' | 'repos'>;
  registryPhoto: Buffer;
  selfie: Buffer;
  calls: number;
  warmUp?: number;
}): Promise<LinkFigures> {
  const { webUrl, deps } = opts;
  let n = 0;
  const one = async () => {
    const i = ++n;
    // A registry person (the simulator's enrolment) and a consumer: not timed.
    const form = new FormData();
    for (const [k, v] of Object.entries({
      firstName: 'Bench',
      lastName: `Link${i}`,
      dateOfBirth: '1950-03-04',
      gender: 'male',
      phone: `+23491${String(i).padStart(8, '0')}`,
    }))
      form.append(k, v);
    form.append('photo', new Blob([new Uint8Array(opts.registryPhoto)], { type: 'image/png' }), 'photo.png');
    const enrolled = await fetch(`${webUrl}/api/enroll`, { method: 'POST', body: form });
    if (enrolled.status !== 201) throw new Error(`registry enrolment answered ${enrolled.status}: ${await enrolled.text()}`);
    const { nin } = ((await enrolled.json()) as { person: { nin: string } }).person;
    const [user] = await deps
      .db('users')
      .insert({ phone: `+23492${String(i).padStart(8, '0')}` })
      .returning('id');
    const [session] = await deps.db('sessions').insert({ subjectType: 'consumer', subjectId: user.id }).returning('id');
    const { token } = await deps.tokens.signAccess({ sub: user.id, aud: 'consumer', sid: session.id });

    const v = await call(`${webUrl}/identity/nin/validate`, token, { nin });
    if (v.status !== 200 || typeof v.body.validationToken !== 'string') throw new Error(`validate answered ${v.status} ${JSON.stringify(v.body)}`);
    const selfie = new FormData();
    selfie.append('validationToken', v.body.validationToken);
    selfie.append('file', new Blob([new Uint8Array(opts.selfie)], { type: 'image/png' }), 'selfie.png');
    const f = await call(`${webUrl}/identity/nin/verify-face`, token, selfie);
    if (f.status !== 200 || typeof f.body.linkToken !== 'string') throw new Error(`verify-face answered ${f.status} ${JSON.stringify(f.body)}`);
    const l = await call(`${webUrl}/identity/nin/link`, token, { linkToken: f.body.linkToken });
    if (l.status !== 200) throw new Error(`link answered ${l.status} ${JSON.stringify(l.body)}`);
    // Not timed: the template goes, so that the next link is not a duplicate of this one.
    await deps.repos.embeddings.remove(user.id);
    return { validate: v.ms, verifyFace: f.ms, link: l.ms };
  };
  for (let i = 0; i < (opts.warmUp ?? 5); i++) await one();
  const rows: Awaited<ReturnType<typeof one>>[] = [];
  for (let i = 0; i < opts.calls; i++) rows.push(await one());
  return {
    wall: summarise(rows.map((r) => r.validate + r.verifyFace + r.link)),
    validate: summarise(rows.map((r) => r.validate)),
    verifyFace: summarise(rows.map((r) => r.verifyFace)),
    link: summarise(rows.map((r) => r.link)),
  };
}
