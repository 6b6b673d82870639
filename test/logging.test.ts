/** Secrets and biometrics never reach a log line, wherever they are nested. */
import test from 'ava';
import { Writable } from 'node:stream';
import { createLogger } from '../platform/logger.js';

test('tokens, codes, passwords, images and embeddings are redacted', (t) => {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(chunk.toString());
      cb();
    },
  });
  const log = createLogger({ level: 'info', destination });
  log.info(
    {
      req: { headers: { authorization: 'Bearer eyJsecret', cookie: 'faceid_admin_ui=abc' } },
      body: { phone: '+2348030000000', code: '123456', password: 'hunter22', refreshToken: 'rt-secret' },
      job: { payload: { imageB64: 'AAAA', image: 'BBBB', embedding: [0.1, 0.2] } },
      proofToken: 'pt-secret',
    },
    'event',
  );
  const out = lines.join('');
  for (const secret of ['AAAA', 'eyJsecret', 'faceid_admin_ui=abc', '123456', 'hunter22', 'rt-secret', 'BBBB', '0.1', 'pt-secret']) {
    t.false(out.includes(secret), `${secret} leaked: ${out}`);
  }
  t.true(out.includes('+2348030000000'), 'non-secret fields stay');
  t.true(out.includes('[redacted]'));
});
