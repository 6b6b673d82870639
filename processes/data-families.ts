/**
 * The retention registry of this deployment: every wing's data families, composed once here
 * (platform/retention/README.md). The web process uses it for the DELETE of an account (its erasers),
 * the upstream worker for the retention sweep (its age rules and the erasers it retries). Order
 * matters for the sweep: disputes before the search logs they hold (processes/wings.ts lists the
 * disputes wing before the verification wing). Each wing declares its families in its manifest
 * (`dataFamilies`); the stores they need (Redis-backed) are typed by the wings into `WingStores` and
 * passed by the process that builds the registry.
 */
import type { Knex } from 'knex';
import type { Config } from '../platform/config.js';
import { auditEventsFamily } from '../platform/retention/audit-events-family.js';
import { RetentionRegistry } from '../platform/retention/registry.js';
import type { WingStores } from '../platform/wing.js';
import { WINGS } from './wings.js';

/** The database, the configuration and the process's stores the wings' families erase from (WingStores). */
export type DataFamilyDeps = { db: Knex; config: Config } & WingStores;

export function dataFamilies(deps: DataFamilyDeps): RetentionRegistry {
  const { db, config, ...stores } = deps;
  return new RetentionRegistry().register(
    auditEventsFamily(db, config.protection.retentionDaysAuditEvents),
    ...WINGS.flatMap((wing) => wing.dataFamilies?.({ db, config, stores }) ?? []),
  );
}
