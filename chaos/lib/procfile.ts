/**
 * The fault suite playing a process manager (foreman, honcho, a PaaS) for the Procfile layout: `release`
 * runs first and must succeed, then each other entry runs as `sh -c '<command>'` in its own process
 * group with the same environment, nothing restarts it, and stopping sends SIGTERM to the whole group
 * (what foreman, honcho and systemd's default KillMode do) and SIGKILL after a grace period.
 *
 * An entry that does not `exec` node (e.g. `npm run start:face`) leaves wrappers above the worker
 * (sh → npm → node); `kill -9` of "the face worker" is a SIGKILL to that last node process, found
 * through /proc.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export interface ProcfileEntry {
  name: string;
  command: string;
}

/** `name: command` lines; blank lines and `#` comments skipped. */
export function parseProcfile(text: string): ProcfileEntry[] {
  const out: ProcfileEntry[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^([A-Za-z0-9_-]+):\s*(.+)$/.exec(line);
    if (!m) throw new Error(`Procfile: cannot read the line ${JSON.stringify(line)}`);
    out.push({ name: m[1]!, command: m[2]! });
  }
  return out;
}

/** Parent pid of every process, from /proc. */
function parents(): Map<number, number> {
  const map = new Map<number, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may hold spaces and parentheses; read after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      map.set(Number(d), ppid);
    } catch {
      // gone meanwhile
    }
  }
  return map;
}

/** `pid`'s descendants, parents before children. */
export function descendants(pid: number): number[] {
  const ppids = parents();
  const out: number[] = [];
  const queue = [pid];
  while (queue.length) {
    const p = queue.shift()!;
    for (const [child, parent] of ppids) {
      if (parent === p) {
        out.push(child);
        queue.push(child);
      }
    }
  }
  return out;
}

export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export interface Managed {
  name: string;
  child: ChildProcess;
  startedAt: number;
  exited: Promise<{ code: number | null; signal: string | null; at: number }>;
}

export class ProcessManager {
  readonly running = new Map<string, Managed>();

  constructor(
    private readonly entries: ProcfileEntry[],
    private readonly opts: { cwd: string; env: NodeJS.ProcessEnv; log: (m: string) => void; logDir?: string },
  ) {}

  private entry(name: string): ProcfileEntry {
    const e = this.entries.find((x) => x.name === name);
    if (!e) throw new Error(`no Procfile entry ${name}`);
    return e;
  }

  /** The `release` entry, to completion (status 0 required). */
  release(): void {
    const r = spawnSync('sh', ['-c', this.entry('release').command], {
      cwd: this.opts.cwd,
      env: this.opts.env,
      stdio: ['ignore', 'ignore', 'pipe'],
      encoding: 'utf8',
    });
    if (r.status !== 0) throw new Error(`release failed (${r.status}): ${r.stderr}`);
  }

  /** Every entry but `release`. */
  processNames(): string[] {
    return this.entries.filter((e) => e.name !== 'release').map((e) => e.name);
  }

  start(name: string): Managed {
    const child = spawn('sh', ['-c', this.entry(name).command], { cwd: this.opts.cwd, env: this.opts.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    // The entry's output: to <logDir>/<name>.log when asked (its error logs name the cause of any 5xx).
    const log = this.opts.logDir ? createWriteStream(path.join(this.opts.logDir, `${name}.log`), { flags: 'a' }) : null;
    child.stdout!.on('data', (d: Buffer) => log?.write(d));
    let tail = '';
    child.stderr!.on('data', (d: Buffer) => {
      log?.write(d);
      tail = (tail + d.toString()).slice(-2000);
    });
    const exited = new Promise<{ code: number | null; signal: string | null; at: number }>((resolve) => {
      child.once('exit', (code, signal) => {
        const at = Date.now();
        this.opts.log(`procfile: ${name} (pid ${child.pid}) exited (${signal ?? code})${code ? `: ${tail.split('\n').slice(-3).join(' | ')}` : ''}`);
        resolve({ code, signal, at });
      });
    });
    const m: Managed = { name, child, startedAt: Date.now(), exited };
    this.running.set(name, m);
    return m;
  }

  /** The node process running processes/<file> under entry `name`: the entry itself when it `exec`s node, else the last of its wrappers (sh → npm → node). */
  workerPid(name: string, file: string): number {
    const m = this.running.get(name);
    if (!m?.child.pid) throw new Error(`${name} is not running`);
    const matches = [m.child.pid, ...descendants(m.child.pid)].filter((p) => cmdline(p).includes(file));
    const leaf = matches.at(-1);
    if (!leaf) throw new Error(`no process runs ${file} under ${name}`);
    return leaf;
  }

  /** Every pid of the entry's process group that is still alive (the group leader and its tree). */
  treeOf(name: string): number[] {
    const pid = this.running.get(name)?.child.pid;
    if (!pid) return [];
    return [pid, ...descendants(pid)].filter(isAlive);
  }

  /**
   * Stops entries as a process manager does: SIGTERM to each process group, SIGKILL to what is left
   * after `graceMs`. Resolves when every group leader has exited.
   */
  async stop(names: string[], graceMs: number): Promise<void> {
    const ms = names.map((n) => this.running.get(n)).filter((m): m is Managed => !!m && m.child.exitCode === null && m.child.signalCode === null);
    for (const m of ms) {
      try {
        process.kill(-m.child.pid!, 'SIGTERM');
      } catch {
        // already gone
      }
    }
    await Promise.all(
      ms.map(async (m) => {
        const timer = setTimeout(() => {
          try {
            process.kill(-m.child.pid!, 'SIGKILL');
          } catch {
            // gone
          }
        }, graceMs);
        await m.exited;
        clearTimeout(timer);
      }),
    );
  }

  /** SIGKILL to every group still running (the suite's own cleanup). */
  killAll(): void {
    for (const m of this.running.values()) {
      try {
        process.kill(-m.child.pid!, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
}
