/** The webhooks wing's list settings, parsed without a service: what an operator writes, what the wing reads. */
import test from 'ava';
import { parseCidr, parsePrivateCidrs, parseRetrySchedule } from '../../features/webhooks/settings.js';
import { ConfigError, loadConfig } from '../../processes/config.js';

test('WEBHOOK_RETRY_SCHEDULE_SECONDS: comma-separated seconds, spaces allowed; empty means no retry; anything else is refused', (t) => {
  t.deepEqual(parseRetrySchedule('5, 300,1800'), [5, 300, 1800]);
  t.deepEqual(parseRetrySchedule('0.5'), [0.5]);
  t.deepEqual(parseRetrySchedule(''), []);
  t.is(parseRetrySchedule('5,-1'), undefined);
  t.is(parseRetrySchedule('5,soon'), undefined);
  const e = t.throws(() => loadConfig({ NODE_ENV: 'development', WEBHOOK_RETRY_SCHEDULE_SECONDS: '5,x' }), { instanceOf: ConfigError });
  t.true(e!.problems.some((p) => p.startsWith('WEBHOOK_RETRY_SCHEDULE_SECONDS')));
});

test('WEBHOOK_PRIVATE_CIDRS: IPv4 and IPv6 networks within their prefix lengths; a malformed entry is refused at load', (t) => {
  t.deepEqual(parseCidr('10.20.0.0/16'), { address: '10.20.0.0', prefix: 16, family: 'ipv4' });
  t.deepEqual(parseCidr(' fd00:20::/32 '), { address: 'fd00:20::', prefix: 32, family: 'ipv6' });
  t.is(parseCidr('10.0.0.0/33'), undefined);
  t.is(parseCidr('10.0.0.0'), undefined);
  t.is(parseCidr('intranet/8'), undefined);
  t.deepEqual(
    parsePrivateCidrs('10.0.0.0/8, ,fd00::/8').map((c) => `${c.address}/${c.prefix}`),
    ['10.0.0.0/8', 'fd00::/8'],
  );
  t.throws(() => loadConfig({ NODE_ENV: 'development', WEBHOOK_PRIVATE_CIDRS: '10.0.0.0/8,nope' }), { instanceOf: ConfigError });
});
