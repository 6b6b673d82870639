/** The floor's phone numbers and name masking, without a service: what a consumer types, what is stored or shown. */
import test from 'ava';
import { AppError } from '../platform/errors.js';
import { maskName } from '../platform/masking.js';
import { countryCallingCode, normalisePhone, requirePhone, requireSmsCountry, smsAllowedTo } from '../platform/phone.js';

test('a Nigerian mobile number in local, spaced or international form is one E.164 number', (t) => {
  for (const raw of ['0803 123 4567', '08031234567', '+2348031234567', ' +234 803 123 4567 ']) t.is(normalisePhone(raw), '+2348031234567', raw);
});

test('text around a number, an extension, a fixed line or a number too long is no phone', (t) => {
  for (const raw of ['call 08031234567', '08031234567 ext. 12', '+44 20 7946 0958', '0803123456', 'x'.repeat(41), '']) t.is(normalisePhone(raw), null, raw);
  const e = t.throws(() => requirePhone('12', 'newPhone'), { instanceOf: AppError });
  t.is(e!.code, 'validation_failed');
  t.is(e!.status, 400);
  t.deepEqual((e!.details as { errors: Array<{ path: string }> }).errors[0]!.path, '/newPhone');
});

test('codes go only to the allowed countries: another country is 400 phone_not_supported', (t) => {
  t.is(countryCallingCode('+2348031234567'), '234');
  t.true(smsAllowedTo('+2348031234567', ['234']));
  t.false(smsAllowedTo('+447700900123', ['234']));
  t.is(requireSmsCountry('+2348031234567', ['234', '233']), '+2348031234567');
  const e = t.throws(() => requireSmsCountry('+447700900123', ['234']), { instanceOf: AppError });
  t.is(e!.code, 'phone_not_supported');
  t.is(e!.status, 400);
});

test('a masked name keeps the first letter of each word, whatever the spacing or script', (t) => {
  t.is(maskName('George Walker Bush'), 'G***** W***** B***');
  t.is(maskName('  Ada   Obi '), 'A** O**');
  t.is(maskName('Ọlá'), 'Ọ**');
  t.is(maskName(''), '');
});
