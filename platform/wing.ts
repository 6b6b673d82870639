/**
 * A wing's manifest: what a wing brings to the house, declared once in its own folder
 * (features/<wing>/manifest.ts) and composed by processes/ (processes/wings.ts). The floor defines the
 * shape and the composition; it never imports a wing.
 *
 * - `settings`: the wing's setting groups (`config.<group>.<key>`), with their checks; declared with the
 *   floor's `s(...)` and parsed by the floor's loader (platform/config.ts), documented in
 *   docs/configuration.md like the floor's own.
 * - `tables`: the tables the wing owns (created by migrations/); only its code names them.
 * - `reads`: another wing's table the wing's code names all the same, each with why:
 *   test/house.test.ts refuses any other.
 * - `metrics`: the wing's counters and gauges (`counterSpec`, `gaugeSpec` in features/<wing>/metrics.ts);
 *   the wing's code reaches them through `metrics.counter(spec)` / `metrics.gauge(spec)`,
 *   processes/web/deps.ts creates them all at start.
 * - `dataFamilies`: the wing's data families (platform/retention/README.md), built from the database,
 *   the configuration and the process's stores the wing types into `WingStores`;
 *   processes/data-families.ts adds them to the retention registry, in the order of processes/wings.ts.
 * - `keyPurposes`: the key-ring purposes only this wing seals under (platform/keys/key-ring.ts), each
 *   with what it protects, typed into `KeyPurposes` by declaration merging; the floor's own
 *   (`FLOOR_KEY_PURPOSES`) are shared by several wings.
 * - `sealedFamilies`: the stored values a key rotation re-seals (platform/keys/sealed-families.ts),
 *   declared to the floor when the wings are composed.
 * - `jobs`: the contracts of the wing's own queues (deferred), typed into `JobContracts` beside them
 *   and registered with the floor's queues (platform/jobs/index.ts) when the wings are composed.
 * - `routes`: the wing's HTTP routes, loaded by the web process alone (processes/web/routes.ts), in the
 *   order of processes/wings.ts: a dynamic import, so the workers and scripts that compose the wings
 *   never load request-side code.
 * - `workers`: the wing's workers, by the kind of process that runs them (`WorkerRoles`): `face` and
 *   `search` are the processes of that name, `background` the queues that need only PostgreSQL and
 *   Redis (in the web process by default, or the `upstream` process). A dynamic import of the wing's
 *   own worker side, so the web process never loads a model and a face process never loads a route;
 *   processes/wing-workers.ts starts every wing's worker of a role, in the order of processes/wings.ts.
 * - `processes`: how many copies of the `face` or `search` process `npm start` runs (and each copy's own
 *   settings), where the wing's settings size them; registered with the floor's process list
 *   (platform/processes/process-list.ts) when the wings are composed.
 */
import type { Knex } from 'knex';
import type { AnyRoute } from './http/route-table.js';
import { registerSettingGroups, type Config, type WingSettingGroup } from './config.js';
import type { Metrics, MetricSpec } from './metrics.js';
import type { DeferredJobContract } from './jobs/contract.js';
import { registerJobContracts } from './jobs/index.js';
import { declareSealedFamily, type SealedFamily } from './keys/sealed-families.js';
import { registerProcessSizing, type ProcessSizing, type SizedProcess } from './processes/process-list.js';
import type { DataFamily } from './retention/registry.js';
import type { KeyRing } from './keys/key-ring.js';
import type { Logger } from './logger.js';

/**
 * The stores of a process (Redis-backed) that wings' data families need to erase a user, by name:
 * each wing that needs one adds it here by declaration merging in its manifest
 * (`declare module '../../platform/wing.js' { interface WingStores { ... } }`), and the process that
 * builds the retention registry (processes/data-families.ts) passes them.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface WingStores {}

/**
 * What the web process hands a wing's route module: the services and the process-wide parts routes use.
 * The floor does not know the services; processes/web/route-deps.ts types them in by declaration merging.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface WingRouteDeps {}

/** A wing's route module: its routes, built from what the web process hands it. */
export type WingRoutes = (deps: WingRouteDeps) => AnyRoute[];

/** What every process hands the workers it runs. */
export interface WingWorkerDeps {
  config: Config;
  logger: Logger;
}

/** What the process running the background queues (web, or `upstream`) hands their workers besides. */
export interface BackgroundWorkerDeps extends WingWorkerDeps {
  db: Knex;
  keyRing: KeyRing;
  /** The process's metrics, where it serves them (the web process); absent in the `upstream` process. */
  metrics?: Metrics;
}

/** The kinds of process that run wings' workers, with what each hands them. */
export interface WorkerRoles {
  /** The `face` process: the face models, the face path's stages. */
  face: WingWorkerDeps;
  /** A `search` process: one replica of one shard of the index. */
  search: WingWorkerDeps;
  /** Deferred queues and sweeps that need PostgreSQL and Redis only. */
  background: BackgroundWorkerDeps;
}

export interface RunningWingWorker {
  /** Stops taking work, lets the running work finish, closes its connections. */
  close(): Promise<void>;
}

/** A wing's worker for one role: started with what the process hands it. */
export type WingWorker<D> = (deps: D) => Promise<RunningWingWorker>;

/** A wing's workers by role, each loaded on demand by the process that runs that role. */
export type WingWorkers = { readonly [R in keyof WorkerRoles]?: () => Promise<WingWorker<WorkerRoles[R]>> };

/** Another wing's (or the floor's) table a wing names, declared with the reason. */
export interface TableRead {
  table: string;
  /** Why it names the table instead of going through the owner's public entry. */
  reason: string;
}

export interface WingManifest {
  /** The wing's folder under features/. */
  name: string;
  /** Its setting groups, by group name (one group per concern; usually one per wing). */
  settings?: Record<string, WingSettingGroup>;
  /** The tables it owns. */
  tables: readonly string[];
  /** Tables of others its code names (knex, Objection models, SQL), with the reason. */
  reads?: readonly TableRead[];
  /** Its counters and gauges (platform/metrics.ts), created (counters with their zero series) when a process builds its metrics. */
  metrics?: readonly MetricSpec[];
  /** Its data families, built from the database, the configuration and the process's stores. */
  dataFamilies?: (deps: { db: Knex; config: Config; stores: WingStores }) => DataFamily[];
  /** The key-ring purposes it alone seals under, with what each protects (typed into `KeyPurposes` beside). */
  keyPurposes?: Readonly<Record<string, string>>;
  /** Its values stored sealed under the key ring, re-sealed by a key rotation. */
  sealedFamilies?: readonly SealedFamily[];
  /** Its own queues' contracts (deferred: the awaited queues are the face path's, the floor's), typed into `JobContracts` beside. */
  jobs?: readonly DeferredJobContract<string, any>[];
  /** Its HTTP routes (web process only): loads the wing's route module when the web process builds its router. */
  routes?: () => Promise<WingRoutes>;
  /** Its workers, by the role of the process that runs them: each loads the wing's worker side when started. */
  workers?: WingWorkers;
  /** How many copies of a worker process `npm start` runs, where the wing's settings size it (the process list, platform/processes/process-list.ts). */
  processes?: { readonly [P in SizedProcess]?: ProcessSizing };
}

/** Declares a wing's manifest (a typed identity: the manifest is data). */
export function defineWing<const M extends WingManifest>(manifest: M): M {
  return manifest;
}

/**
 * The tables of the floor's own mechanisms: audit events (platform/events), written by every wing
 * through the event map and aged out by the floor's retention family.
 */
export const FLOOR_TABLES = ['audit_events'] as const;

/** A wing's table the floor's code names, with why (checked like a wing's reads). */
export const FLOOR_READS: readonly TableRead[] = [
  {
    table: 'webhook_events',
    reason:
      "the event map writes a public event's outbox row in the transaction of the change (platform/events/audit.ts), so no wing imports the webhooks wing to report an event; the webhooks wing delivers and purges the rows",
  },
];

/**
 * A wing's setting the floor's code reads (through the merged `Config` type), with why: it runs only
 * where processes/config.ts composed the wings. Checked like the table reads. None today: the process
 * list's counts of face and search processes are the wings' (their manifests' `processes`).
 */
export const FLOOR_SETTING_READS: readonly { setting: string; reason: string }[] = [];

/** Composes the wings: registers their settings with the floor's configuration and their sealed families with the key rotation. Idempotent. */
export function composeWings(wings: readonly WingManifest[]): readonly WingManifest[] {
  const names = new Set<string>();
  for (const wing of wings) {
    if (names.has(wing.name)) throw new Error(`Wing ${wing.name} is listed twice`);
    names.add(wing.name);
    registerSettingGroups(wing.name, wing.settings ?? {});
    for (const family of wing.sealedFamilies ?? []) declareSealedFamily(family);
    registerJobContracts(wing.name, wing.jobs ?? []);
    for (const [process, sizing] of Object.entries(wing.processes ?? {})) registerProcessSizing(process as SizedProcess, wing.name, sizing);
  }
  return wings;
}
