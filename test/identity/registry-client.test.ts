/**
 * The registry client against registries that misbehave (the registry is outside our control, so a
 * stand-in HTTP server plays it): a redirect is not followed and an oversized answer is not read whole;
 * both are 502 `registry_unavailable`.
 */
import test from 'ava';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { AppError } from '../../platform/errors.js';
import { RegistryClient } from '../../features/identity/registry-client.js';

async function server(handler: http.RequestListener): Promise<{ url: string; hits: string[]; close(): Promise<void> }> {
  const hits: string[] = [];
  const s = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    handler(req, res);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, hits, close: () => new Promise((r) => s.close(() => r())) };
}

const record = { nin: '12345678901', firstName: 'Ada', lastName: 'Obi', dateOfBirth: '1990-04-01', gender: 'F', photo: Buffer.alloc(64).toString('base64') };

test('a redirect from the registry is not followed: 502, and the other host is never asked', async (t) => {
  const elsewhere = await server((_req, res) => res.end(JSON.stringify(record)));
  const registry = await server((req, res) => {
    res.writeHead(302, { location: `${elsewhere.url}${req.url}` });
    res.end();
  });
  try {
    const client = new RegistryClient({ registryUrl: registry.url, registryTimeoutMs: 2000, isProduction: false });
    const err = await t.throwsAsync(client.lookup('nin', '12345678901', { includePhoto: true }), { instanceOf: AppError });
    t.is(err!.code, 'registry_unavailable');
    t.is(elsewhere.hits.length, 0);
  } finally {
    await registry.close();
    await elsewhere.close();
  }
});

test('an answer over the body cap is cut: 502, declared or streamed', async (t) => {
  const big = JSON.stringify({ ...record, photo: Buffer.alloc(200_000).toString('base64') });
  const declared = await server((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(big) });
    res.end(big);
  });
  const streamed = await server((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }); // chunked, no length
    for (let i = 0; i < 100; i++) res.write(' '.repeat(10_000));
    res.end(big);
  });
  try {
    for (const s of [declared, streamed]) {
      const client = new RegistryClient({ registryUrl: s.url, registryTimeoutMs: 5000, isProduction: false, maxBodyBytes: 100_000 });
      const err = await t.throwsAsync(client.lookup('nin', '12345678901', { includePhoto: true }), { instanceOf: AppError });
      t.is(err!.code, 'registry_unavailable');
    }
    // Within the cap the same record is read.
    const ok = new RegistryClient({ registryUrl: declared.url, registryTimeoutMs: 5000, isProduction: false, maxBodyBytes: 1_000_000 });
    t.is((await ok.lookup('nin', '12345678901', { includePhoto: true }))!.firstName, 'Ada');
  } finally {
    await declared.close();
    await streamed.close();
  }
});
