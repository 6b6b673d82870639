/**
 * Hosts for `npm run start:ha -- --hosts`: each part of the layout in a network namespace of its own,
 * made here and removed at stop, so that a part's address is a host's address and a host can be cut
 * off from the others as a machine would be (SPEC 13.2).
 *
 * Every namespace gets one veth pair: `eth0` inside (the host's only link: `ip link set eth0 down`
 * inside the namespace cuts it off, `up` heals it with no other step), the other end on one bridge in
 * the machine's own namespace. All hosts are on one subnet (10.213.<n>.0/24 by default), the bridge
 * holds the subnet's first address (the machine itself, where the balancer answers on PORT), so the
 * kernel restores the subnet route when a link comes back up. Loopback inside a namespace is up but
 * nothing of the layout uses it: every part listens on its host's address and is reached there.
 *
 * Names carry a short tag (`fh<tag>-...`) so that two layouts on one machine, or a leftover of a
 * killed run, never collide; `removeHosts` deletes exactly the names it made (and `sweepHosts` those
 * left by an earlier run of the same tag).
 */
import { spawnSync } from 'node:child_process';

export interface Host {
  /** The part's name (`pg1`, `redis-master`, `web-1`...). */
  name: string;
  /** The network namespace (`ip netns exec <netns> ...`). */
  netns: string;
  /** The interface inside the namespace whose loss cuts the host off. */
  link: string;
  /** The host's address. */
  address: string;
}

export interface HostNetwork {
  bridge: string;
  /** The machine's own address on the subnet (the bridge's). */
  gateway: string;
  subnet: string;
  hosts: Map<string, Host>;
  host(name: string): Host;
  /** `[command, args]` that run `command args` inside the host's namespace. */
  inHost(name: string, command: string, args: string[]): [string, string[]];
  remove(): void;
}

const LINK = 'eth0';

function ip(args: string[], allowFailure = false): string {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0 && !allowFailure) throw new Error(`ip ${args.join(' ')}: ${(r.stderr || r.stdout).trim()}`);
  return r.stdout;
}

/** Whether this machine lets us make namespaces (root, and `ip netns` available). */
export function canMakeHosts(): { ok: true } | { ok: false; why: string } {
  if (process.getuid?.() !== 0) return { ok: false, why: 'network namespaces need root (ip netns add)' };
  const probe = `fhprobe${process.pid}`;
  const r = spawnSync('ip', ['netns', 'add', probe], { encoding: 'utf8' });
  if (r.status !== 0) return { ok: false, why: `ip netns add failed: ${(r.stderr || r.stdout).trim()}` };
  ip(['netns', 'del', probe], true);
  return { ok: true };
}

/** Deletes the namespaces, veth ends and bridge of `tag` (a run that was killed before it could). */
export function sweepHosts(tag: string): void {
  for (const line of ip(['netns', 'list'], true).split('\n')) {
    const ns = line.split(' ')[0];
    if (ns && ns.startsWith(`fh${tag}-`)) ip(['netns', 'del', ns], true);
  }
  ip(['link', 'del', `fh${tag}br`], true);
}

/**
 * Makes one namespace per name, on subnet `10.213.<subnetIndex>.0/24`: the bridge is .1, the hosts
 * .10 upwards in the order given.
 */
export function makeHosts(names: string[], opts: { tag: string; subnetIndex: number }): HostNetwork {
  const { tag } = opts;
  sweepHosts(tag);
  const prefix = `10.213.${opts.subnetIndex}`;
  const bridge = `fh${tag}br`;
  const gateway = `${prefix}.1`;
  const made: string[] = [];
  const hosts = new Map<string, Host>();
  const remove = () => {
    for (const ns of made) ip(['netns', 'del', ns], true); // takes the veth pair with it
    ip(['link', 'del', bridge], true);
  };
  try {
    ip(['link', 'add', bridge, 'type', 'bridge']);
    ip(['addr', 'add', `${gateway}/24`, 'dev', bridge]);
    ip(['link', 'set', bridge, 'up']);
    names.forEach((name, i) => {
      const netns = `fh${tag}-${name}`;
      const outside = `fh${tag}v${i}`;
      const address = `${prefix}.${10 + i}`;
      ip(['netns', 'add', netns]);
      made.push(netns);
      ip(['link', 'add', outside, 'type', 'veth', 'peer', 'name', LINK, 'netns', netns]);
      ip(['link', 'set', outside, 'master', bridge]);
      ip(['link', 'set', outside, 'up']);
      ip(['-n', netns, 'addr', 'add', `${address}/24`, 'dev', LINK]);
      ip(['-n', netns, 'link', 'set', LINK, 'up']);
      ip(['-n', netns, 'link', 'set', 'lo', 'up']);
      // The machine (the bridge) is the way out of the subnet, as a real host's gateway would be.
      ip(['-n', netns, 'route', 'add', 'default', 'via', gateway]);
      hosts.set(name, { name, netns, link: LINK, address });
    });
  } catch (e) {
    remove();
    throw e;
  }
  return {
    bridge,
    gateway,
    subnet: `${prefix}.0/24`,
    hosts,
    host: (name) => {
      const h = hosts.get(name);
      if (!h) throw new Error(`no host named ${name}`);
      return h;
    },
    inHost: (name, command, args) => {
      const h = hosts.get(name);
      if (!h) throw new Error(`no host named ${name}`);
      return ['ip', ['netns', 'exec', h.netns, command, ...args]];
    },
    remove,
  };
}

/** Cuts a host off (`down`) or heals it (`up`): its one link, inside its namespace. */
export function setLink(host: { netns?: string; link?: string }, state: 'up' | 'down'): void {
  if (!host.netns || !host.link) throw new Error('not a host of `start:ha --hosts` (no netns or link)');
  ip(['-n', host.netns, 'link', 'set', host.link, state]);
}
