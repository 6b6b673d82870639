/** What the staff console's desk (Staff.tsx) and office (Admin.tsx) share: who is signed in, how an error reads. */
import type { ApiError } from '../api/client.js';

export interface StaffIdentity {
  operatorId: string;
  identifier: string;
  administrator: boolean;
}

export const problem = (e: unknown) => {
  const err = e as ApiError | undefined;
  return err?.message ? `${err.message} (${err.error})` : 'Something went wrong';
};
