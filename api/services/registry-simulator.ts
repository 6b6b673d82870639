// The simulator lives in api/registry-simulator/; this re-export only keeps scripts/seed-registry.ts
// (owned elsewhere) compiling until its import moves there. Delete it then.
import type { Knex } from 'knex';
import { registrySimulatorOn, type EnrolInput } from '../registry-simulator/simulator.js';

export const findByNameAndBirth = (db: Knex, p: Parameters<ReturnType<typeof registrySimulatorOn>['findByNameAndBirth']>[0]) =>
  registrySimulatorOn(db, { maxImagePixels: Number.MAX_SAFE_INTEGER }).findByNameAndBirth(p);
export const enrol = (db: Knex, input: EnrolInput, opts: { maxImagePixels: number }) => registrySimulatorOn(db, opts).enrol(input);
