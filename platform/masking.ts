/** Masking of personal values for answers and logs that must not carry them whole. */

/** "George Walker Bush" → "G***** W***** B***": the first letter of each word kept, the rest stars. */
export function maskName(name: string): string {
  return name
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map((w) => {
      const chars = Array.from(w);
      return chars[0]! + '*'.repeat(chars.length - 1);
    })
    .join(' ');
}
