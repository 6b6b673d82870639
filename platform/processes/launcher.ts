/**
 * The launcher of the whole service on one machine, shared by `npm start` (scripts/start.ts) and
 * `npm run start:ha` (scripts/start-ha.ts), which differ only by their layout: what they start around
 * the processes (PostgreSQL and Redis, or the replicated parts with their proxies), the environment the
 * processes get, and how many copies of each process of the list (process-list.ts) run.
 *
 * The launcher, for every layout:
 * - handles SIGINT, SIGTERM and SIGHUP from its first moment, and stops as well when whoever started it
 *   is gone (it was re-parented: npm's `sh -c` may not pass a signal on);
 * - prepares the layout, runs the migrations (the list's release), then starts the copies under its
 *   supervisor (supervisor.ts: restarts with backoff, crash loops, the status file GET /health reports);
 * - on a stop: waits for a start in progress to settle (nothing is started after it), then stops the
 *   processes that drain first (web), then the others, each given `supervisorGraceMs` (beyond each
 *   child's own stop deadline: shutdown.ts), restarting none from the signal on, whichever exits by
 *   itself (a signal sent to the whole process group reaches every child directly); then what the
 *   layout started, in reverse order; it exits only when every child is gone.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { config, loadConfig, type Config } from '../config.js';
import { RELEASE, type ProcessCopy } from './process-list.js';
import { supervisorGraceMs } from './shutdown.js';
import { Supervisor, supervisorOptions } from './supervisor.js';

/** What a layout starts, once its servers are up. */
export interface LaunchPlan {
  /** The processes' shared environment (`environmentWith` the settings the layout chose). */
  env: NodeJS.ProcessEnv;
  /** The copies to run (`processCopies`), in start order. */
  copies: ProcessCopy[];
  /** Where the service answers `/health` once up. */
  url: string;
  /** Run the migrations before the processes (default true). */
  release?: boolean;
  /**
   * Settings for the migrations only, over `env` (the owner's MIGRATION_DATABASE_URL): the processes
   * never receive them, so an application process holds the application role's credentials only.
   */
  releaseEnv?: Record<string, string>;
  /** The command line of a copy when it does not run as the launcher's own child (a host of its own: `start:ha --hosts`). */
  commandOf?: (copy: ProcessCopy, command: string, args: string[]) => [string, string[]];
}

export interface Layout {
  /** The command's name, the prefix of the launcher's own lines: `start`, `start:ha`. */
  name: string;
  /** Starts what the processes need, registering how to stop each with `launcher.onStop`. */
  prepare(launcher: Launcher): Promise<LaunchPlan>;
  /** Runs once the processes are started (a layout file to write, for instance). */
  started?(launcher: Launcher, plan: LaunchPlan): Promise<void> | void;
}

/** How the launcher stops the copies of a plan: the groups in order, and the wait before SIGKILL. */
export function stopPlan(copies: readonly ProcessCopy[], children: Pick<Config, 'http'>): { groups: string[][]; graceMs: number } {
  const first = copies.filter((c) => c.process.drainsFirst).map((c) => c.name);
  const rest = copies.filter((c) => !c.process.drainsFirst).map((c) => c.name);
  return { groups: [first, rest].filter((g) => g.length > 0), graceMs: supervisorGraceMs(children) };
}

/** `node --import tsx <file>`: the child is the launcher's own (its ppid is ours), no wrapper between. */
export const nodeArgs = (file: string, ...args: string[]) => ['--import', 'tsx', file, ...args];

export class Launcher {
  readonly say: (msg: string) => void;
  private readonly cleanups: { what: string; stop: () => Promise<void> | void }[] = [];
  private supervisor: Supervisor | undefined;
  private plan: LaunchPlan | undefined;
  private childConfig: Config | undefined;
  private starting: Promise<void> = Promise.resolve();
  private stopped: Promise<void> | undefined;

  constructor(
    readonly layout: Layout,
    /** The repository root: the children's working directory, the entry files' base. */
    readonly root: string,
  ) {
    this.say = (msg) => console.log(`[${layout.name}] ${msg}`);
  }

  /** True once a stop began: a layout still preparing may stop early. */
  get stopping(): boolean {
    return this.stopped !== undefined;
  }

  /** Registers how to stop something the layout started; run after the processes, in reverse order. */
  onStop(what: string, stop: () => Promise<void> | void): void {
    this.cleanups.push({ what, stop });
  }

  /** The pid of a running copy, by name (null when it is not running). */
  pid(name: string): number | null {
    return this.supervisor?.pid(name) ?? null;
  }

  /** Starts the layout and its processes, and stops them all on a signal. */
  run(): void {
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => void this.stop(signal));
    const parent = process.ppid;
    setInterval(() => {
      if (process.ppid !== parent) void this.stop(`parent ${parent} is gone`);
    }, 1000).unref();
    this.starting = this.start().catch((e: unknown) => {
      this.say(`failed: ${e instanceof Error ? e.message : String(e)}`);
      void this.stop('start-up failed', 1);
    });
    void this.starting.then(() => this.announceReady());
  }

  private async start(): Promise<void> {
    const plan = await this.layout.prepare(this);
    if (this.stopping) return;
    const statusFile = path.resolve(this.root, loadConfig(plan.env).supervisor.statusFile || path.join('var', 'run', 'supervisor.json'));
    const env: NodeJS.ProcessEnv = { ...plan.env, SUPERVISOR_STATUS_FILE: statusFile };
    // The release's own settings never reach a process, not even from the launcher's environment.
    for (const name of Object.keys(plan.releaseEnv ?? {})) delete env[name];
    const childConfig = loadConfig(env);
    if (plan.release !== false) {
      this.say('running migrations');
      const migrate = spawnSync(process.execPath, nodeArgs(RELEASE.file, ...RELEASE.args), {
        cwd: this.root,
        env: { ...env, ...plan.releaseEnv },
        stdio: 'inherit',
      });
      if (migrate.status !== 0) throw new Error('migrations failed');
      if (this.stopping) return;
    }
    this.plan = { ...plan, env };
    this.childConfig = childConfig;
    const supervisor = new Supervisor({ ...supervisorOptions(childConfig), statusFile, log: this.say });
    this.supervisor = supervisor;
    for (const copy of plan.copies) {
      const [command, args] = plan.commandOf
        ? plan.commandOf(copy, process.execPath, nodeArgs(copy.process.file))
        : [process.execPath, nodeArgs(copy.process.file)];
      supervisor.add({ name: copy.name, command, args, env: { ...env, ...copy.env }, cwd: this.root });
    }
    // What the scripts a user runs beside the service (npm run seed:registry) read to find it.
    const serviceFile = path.resolve(this.root, config().supervisor.serviceFile);
    mkdirSync(path.dirname(serviceFile), { recursive: true });
    writeFileSync(serviceFile, JSON.stringify({ pid: process.pid, url: plan.url, startedAt: new Date().toISOString() }, null, 2));
    this.onStop('the service file', () => rmSync(serviceFile, { force: true }));
    this.say(`started ${supervisor.names().join(', ')} (a process that dies is restarted); waiting for the API to answer...`);
    await this.layout.started?.(this, this.plan);
  }

  private async announceReady(): Promise<void> {
    const plan = this.plan;
    if (!plan) return;
    for (let i = 0; i < 600 && !this.stopping; i++) {
      try {
        const res = await fetch(`${plan.url}/health`, { signal: AbortSignal.timeout(1000) });
        // A degraded service's 503 still lists its dependencies; a balancer with no process in
        // service yet (start:ha's HAProxy) answers its own 503, which is no API answering.
        const body = (await res.json().catch(() => null)) as { dependencies?: unknown } | null;
        if (res.status === 200 || (res.status === 503 && body?.dependencies !== undefined)) {
          this.say(`ready: the API answers on ${plan.url} (try /health). Ctrl-C stops everything.`);
          return;
        }
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** Stops everything (once: a repeated stop waits for the first), then exits with `code`. */
  stop(why: string, code = 0): Promise<void> {
    this.stopped ??= (async () => {
      this.say(`stopping (${why}): web first (it drains in-flight requests), then the workers, then what the layout started...`);
      // A start in progress settles first: what it starts is then stopped below, and it starts nothing more.
      await this.starting;
      if (this.supervisor && this.plan && this.childConfig) {
        const { groups, graceMs } = stopPlan(this.plan.copies, this.childConfig);
        await this.supervisor.shutDown(groups, graceMs);
      }
      for (const cleanup of this.cleanups.reverse()) {
        try {
          await cleanup.stop();
        } catch (e) {
          this.say(`stopping ${cleanup.what} failed: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
      this.say('stopped');
      process.exit(code);
    })();
    return this.stopped;
  }
}

/** Runs a layout: `npm start` and `npm run start:ha` are each this call with their own layout. */
export function launch(layout: Layout, root: string): Launcher {
  const launcher = new Launcher(layout, root);
  launcher.run();
  return launcher;
}
