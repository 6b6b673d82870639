/**
 * New staff passwords (NIST SP 800-63B 5.1.1.2, ASVS 5.0 V6.2): at least 8 characters (the route's
 * schema), and not a common or breached password. No composition rules (800-63B advises against
 * them); instead a block list: the ~49,000 most common passwords of public breach corpora shipped by
 * `@zxcvbn-ts/language-common` (docs/dependencies.md), checked as typed and with the decorations people
 * add to a common word (`Password1!` is `password`), plus context words (the identifier, the product's
 * name) and one repeated character.
 */
import { dictionary } from '@zxcvbn-ts/language-common';

let common: Set<string> | undefined;
const commonPasswords = (): Set<string> => (common ??= new Set((dictionary['passwords-common'] as string[]).map((p) => p.toLowerCase())));

const CONTEXT_WORDS = ['faceid', 'operator', 'administrator', 'admin'];

/** Why a new password is refused, or null when it may be used. */
export function weakPasswordReason(password: string, context: { identifier?: string } = {}): string | null {
  const p = password.normalize('NFC').toLowerCase();
  const list = commonPasswords();
  if (list.has(p)) return 'it is one of the most common passwords';
  // Common words with digits or symbols around them ("Password1!", "!qwerty2024").
  const core = p.replace(/^[^a-z]+|[^a-z]+$/g, '');
  if (core.length >= 3 && core !== p && list.has(core)) return 'it is a common password with digits or symbols added';
  if (/^(.)\1*$/u.test(p)) return 'it repeats one character';
  const context2 = [...CONTEXT_WORDS, ...(context.identifier ? [context.identifier.toLowerCase()] : [])];
  for (const word of context2) {
    if (word.length >= 3 && (p === word || core === word)) return 'it is the account name or the service name';
  }
  return null;
}
