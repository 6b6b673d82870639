/**
 * The SMS notices of a phone change: the old number learns that the account moved (the owner of a
 * SIM-swapped or stolen account hears of it there), the new one that it now signs in to the account.
 * Only a masked form of the other number appears in each message.
 */
const mask = (phone: string) => `${phone.slice(0, 4)}•••••${phone.slice(-3)}`;

export function phoneChangeNotices(oldPhone: string, newPhone: string): { to: string; message: string }[] {
  return [
    {
      to: oldPhone,
      message: `faceid: the phone number of your account was changed to ${mask(newPhone)} and your other sessions were signed out. If this was not you, contact support now.`,
    },
    { to: newPhone, message: `faceid: this number is now the phone number of your faceid account (it was ${mask(oldPhone)}).` },
  ];
}
