/**
 * Process supervision for the launcher (platform/processes/launcher.ts: `npm start` and `npm run start:ha`):
 * each child process of the service (the list: platform/processes/process-list.ts) is restarted when it
 * dies, with exponential backoff, while the others keep serving.
 *
 * - Backoff: RESTART_BACKOFF_INITIAL_MS (default 500 ms), doubled after each failure in a row, at most
 *   RESTART_BACKOFF_MAX_MS (default 30 s); a child that stayed up STABLE_AFTER_MS (default 30 s) starts
 *   the count again.
 * - Crash loop: CRASH_LOOP_RESTARTS (default 5) restarts within CRASH_LOOP_WINDOW_MS (default 60 s) is
 *   logged as a crash loop and marked so in the status file; restarts go on at the backoff (a dependency
 *   that comes back is picked up without an operator).
 * - Status: every change is written (atomically) to a JSON file (SUPERVISOR_STATUS_FILE, default
 *   var/run/supervisor.json) that the web process reports in GET /health (`processes`).
 * - Stop: `stop()` sends SIGTERM (the child drains: see platform/processes/shutdown.ts), then SIGKILL after the
 *   grace period. `shutDown()` stops the whole supervisor: from its first moment nothing is restarted or
 *   added, whichever child exits (a stop signal sent to the process group reaches the children directly,
 *   and the workers, quicker than web's drain, used to be restarted meanwhile and outlive the launcher);
 *   it resolves when every child is gone.
 * The children get SUPERVISOR_PID: each exits when its supervisor is gone (no orphan keeps a port).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../config.js';

export interface SupervisorOptions {
  initialBackoffMs: number;
  maxBackoffMs: number;
  stableAfterMs: number;
  crashLoopRestarts: number;
  crashLoopWindowMs: number;
  statusFile?: string;
  log: (msg: string) => void;
}

/** The supervisor's settings from the configuration (RESTART_BACKOFF_*, STABLE_AFTER_MS, CRASH_LOOP_*). */
export const supervisorOptions = (c: Config): Omit<SupervisorOptions, 'log'> => ({
  initialBackoffMs: c.supervisor.restartBackoffInitialMs,
  maxBackoffMs: c.supervisor.restartBackoffMaxMs,
  stableAfterMs: c.supervisor.stableAfterMs,
  crashLoopRestarts: c.supervisor.crashLoopRestarts,
  crashLoopWindowMs: c.supervisor.crashLoopWindowMs,
  ...(c.supervisor.statusFile ? { statusFile: c.supervisor.statusFile } : {}),
});

export type ChildState = 'starting' | 'running' | 'restarting' | 'stopping' | 'stopped';

export interface ChildStatus {
  name: string;
  state: ChildState;
  pid: number | null;
  restarts: number;
  crashLoop: boolean;
  lastExit: { code: number | null; signal: string | null; at: string } | null;
  nextRestartAt: string | null;
  startedAt: string | null;
}

export interface ChildSpec {
  name: string;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
}

class Supervised {
  child: ChildProcess | undefined;
  status: ChildStatus;
  private failuresInRow = 0;
  private restartTimes: number[] = [];
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;
  private exited: Promise<void> = Promise.resolve();

  constructor(
    readonly spec: ChildSpec,
    private readonly opts: SupervisorOptions,
    private readonly changed: () => void,
    /** True once the whole supervisor stops: no restart from then on. */
    private readonly supervisorStopping: () => boolean,
  ) {
    this.status = { name: spec.name, state: 'starting', pid: null, restarts: 0, crashLoop: false, lastExit: null, nextRestartAt: null, startedAt: null };
  }

  start(): void {
    const started = Date.now();
    const child = spawn(this.spec.command, this.spec.args, {
      cwd: this.spec.cwd,
      env: { ...this.spec.env, SUPERVISOR_PID: String(process.pid) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.status = { ...this.status, state: 'running', pid: child.pid ?? null, startedAt: new Date(started).toISOString(), nextRestartAt: null };
    const prefix = `[${this.spec.name}] `;
    for (const stream of [child.stdout!, child.stderr!]) {
      let buf = '';
      stream.on('data', (chunk: Buffer) => {
        buf += chunk.toString();
        const lines = buf.split('\n');
        buf = lines.pop() ?? '';
        for (const line of lines) process.stdout.write(prefix + line + '\n');
      });
      stream.on('end', () => {
        if (buf) process.stdout.write(prefix + buf + '\n');
        buf = '';
      });
    }
    // Gone means its output read to the end too: the last lines of a stopping child are not lost.
    const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
    this.exited = new Promise<void>((exitedAndClosed) => {
      const resolve = () => void closed.then(exitedAndClosed);
      child.once('exit', (code, signal) => {
        this.status = { ...this.status, pid: null, lastExit: { code, signal, at: new Date().toISOString() } };
        if (this.stopping || this.supervisorStopping()) {
          this.stopping = true;
          this.status.state = 'stopped';
          this.changed();
          resolve();
          return;
        }
        const upMs = Date.now() - started;
        this.failuresInRow = upMs >= this.opts.stableAfterMs ? 1 : this.failuresInRow + 1;
        const now = Date.now();
        this.restartTimes = [...this.restartTimes.filter((t) => now - t < this.opts.crashLoopWindowMs), now];
        const crashLoop = this.restartTimes.length >= this.opts.crashLoopRestarts;
        const delay = Math.min(this.opts.maxBackoffMs, this.opts.initialBackoffMs * 2 ** (this.failuresInRow - 1));
        this.status = {
          ...this.status,
          state: 'restarting',
          restarts: this.status.restarts + 1,
          crashLoop,
          nextRestartAt: new Date(now + delay).toISOString(),
        };
        this.opts.log(
          `${this.spec.name} exited (${signal ?? code}) after ${(upMs / 1000).toFixed(1)} s; restarting in ${delay} ms` +
            (crashLoop ? ` — CRASH LOOP: ${this.restartTimes.length} restarts in ${Math.round(this.opts.crashLoopWindowMs / 1000)} s` : ''),
        );
        this.changed();
        this.timer = setTimeout(() => {
          this.timer = undefined;
          if (!this.stopping && !this.supervisorStopping()) {
            this.start();
            this.changed();
          }
        }, delay);
        resolve();
      });
    });
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves when the child is gone. */
  async stop(graceMs: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) {
      this.status.state = 'stopped';
      this.changed();
      return;
    }
    this.status.state = 'stopping';
    this.changed();
    const force = setTimeout(() => {
      this.opts.log(`${this.spec.name} did not stop within ${graceMs} ms: SIGKILL`);
      child.kill('SIGKILL');
    }, graceMs);
    child.kill(signal);
    await this.exited;
    clearTimeout(force);
  }

  /** Resolves when the current child (if any) has exited. */
  gone(): Promise<void> {
    return this.exited;
  }
}

export class Supervisor {
  private readonly children = new Map<string, Supervised>();
  private shuttingDown = false;

  constructor(private readonly opts: SupervisorOptions) {}

  /** Starts a child and supervises it; refused (false) once the supervisor shuts down. */
  add(spec: ChildSpec): boolean {
    if (this.shuttingDown) {
      this.opts.log(`${spec.name} not started: stopping`);
      return false;
    }
    const s = new Supervised(
      spec,
      this.opts,
      () => this.writeStatus(),
      () => this.shuttingDown,
    );
    this.children.set(spec.name, s);
    s.start();
    this.writeStatus();
    return true;
  }

  /** True once `shutDown` was called. */
  get stopping(): boolean {
    return this.shuttingDown;
  }

  /**
   * Stops every child, group after group (each group at once, each child with `graceMs` before
   * SIGKILL; children in no group last), restarting none from the call on, and resolves when every
   * child is gone, also the ones that exited by themselves.
   */
  async shutDown(groups: string[][], graceMs: number): Promise<void> {
    this.shuttingDown = true;
    const grouped = new Set(groups.flat());
    for (const group of [...groups, this.names().filter((n) => !grouped.has(n))]) await this.stop(group, graceMs);
    await Promise.all([...this.children.values()].map((c) => c.gone()));
  }

  status(): ChildStatus[] {
    return [...this.children.values()].map((c) => ({ ...c.status }));
  }

  pid(name: string): number | null {
    return this.children.get(name)?.status.pid ?? null;
  }

  /** Stops the named children (all of them at once), each with its grace period. */
  async stop(names: string[], graceMs: number): Promise<void> {
    await Promise.all(names.map((n) => this.children.get(n)?.stop(graceMs)));
  }

  names(): string[] {
    return [...this.children.keys()];
  }

  private writeStatus(): void {
    if (!this.opts.statusFile) return;
    try {
      mkdirSync(path.dirname(this.opts.statusFile), { recursive: true });
      const tmp = `${this.opts.statusFile}.${process.pid}.tmp`;
      writeFileSync(tmp, JSON.stringify({ supervisorPid: process.pid, updatedAt: new Date().toISOString(), processes: this.status() }, null, 2));
      renameSync(tmp, this.opts.statusFile);
    } catch (e) {
      this.opts.log(`could not write ${this.opts.statusFile}: ${(e as Error).message}`);
    }
  }
}
