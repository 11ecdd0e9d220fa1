/**
 * Stand-ins for what this host cannot give an agent under measurement (cli-with-stand-ins.ts runs them):
 *
 * - IPVS: the host kernel has neither ip_vs (nor so iptables' `ipvs` match) nor the dummy link type, so proxy-ipvs
 *   gets an {@link IpvsStandInRunner}: ipvsadm is answered from a table it keeps (what `-R` wrote is what `-Sn`
 *   prints), the IPVS sysctls succeed, kube-dummy-if is made a bridge (which holds the VIPs as a dummy link would),
 *   and an `-m ipvs ...` match is written as a comment naming it (and read back as the match). Every other command
 *   (ip, ipset, iptables, conntrack, bridge) runs for real in the agent's network namespace. The proxy's IPVS is
 *   tested for real in the QEMU guest (proxy.real.test.ts); here only its memory is measured.
 * - a routing plugin without BGP: {@link nodeRoutesPlugin} hands route-sync a route to every other Node's pod CIDRs,
 *   as routing-bgp hands it what it learns, so that route-sync's routes can be churned through Node objects.
 */
import { createSyncController, definePlugin, routeSyncServiceKey, type ControllerPlugin, type InjectedRoute } from '@kube-router/controller';
import { KubeServices } from '@kube-router/kube';
import { ExecRunner, type CommandResult, type CommandRunner, type CommandSpec } from '@kube-router/netfilter';
import { ROUTE_SYNC_CONTROLLER } from '@kube-router/route-sync';
import { z } from 'zod';

const DUMMY_INTERFACE = 'kube-dummy-if';

/** One virtual service as `ipvsadm -R` wrote it: its `-A` line and its real servers' `-a` lines by address. */
interface StandInService {
  line: string;
  destinations: Map<string, string>;
}

/**
 * IPVS as a table of the lines ipvsadm was given: a line that adds what exists, or changes or deletes what does not,
 * is refused the way ipvsadm refuses it (reported on stderr, the rest applied). It holds what the proxy put there and
 * nothing else, so that it cannot grow unless the proxy leaves services behind.
 */
export class IpvsStandIn {
  readonly #services = new Map<string, StandInService>();

  /** `ipvsadm -R`: every line applied that can be; the refused ones on stderr, exit 255 when the last was. */
  restore(input: string): { stderr: string; exitCode: number } {
    const refused: string[] = [];
    let lastRefused = false;
    for (const line of input.split('\n')) {
      if (!line.trim()) continue;
      const problem = this.#apply(line.trim());
      lastRefused = problem !== undefined;
      if (problem) refused.push(`${problem}: ${line.trim()}`);
    }
    return { stderr: refused.join('\n'), exitCode: lastRefused ? 255 : 0 };
  }

  /** `ipvsadm -Sn`. */
  save(): string {
    return [...this.#services.values()].flatMap((service) => [service.line, ...service.destinations.values()]).join('\n');
  }

  /** `ipvsadm -Ln`, no connection on any real server. */
  list(): string {
    const lines = ['IP Virtual Server version 1.2.1 (size=4096)', 'Prot LocalAddress:Port Scheduler Flags', '  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn'];
    for (const service of this.#services.values()) {
      const [, flag = '', address = '', , scheduler = 'wlc'] = service.line.split(/\s+/);
      lines.push(`${protocolName(flag)}  ${address} ${scheduler}`);
      for (const destination of service.destinations.values()) lines.push(`  -> ${destination.split(/\s+/)[4]}  Masq    1      0          0`);
    }
    return lines.join('\n');
  }

  /** `ipvsadm -Ln --stats --exact`: every counter 0. */
  stats(): string {
    return [...this.#services.values()].map((service) => `${protocolName(service.line.split(/\s+/)[1] ?? '')}  ${service.line.split(/\s+/)[2]}  0 0 0 0 0`).join('\n');
  }

  clear(): void {
    this.#services.clear();
  }

  #apply(line: string): string | undefined {
    const words = line.split(/\s+/);
    const [command, flag, address] = words;
    const key = `${flag} ${address}`;
    const service = this.#services.get(key);
    const destination = words[words.indexOf('-r') + 1] ?? '';
    switch (command) {
      case '-A':
        if (service) return 'Service already exists';
        this.#services.set(key, { line, destinations: new Map() });
        return undefined;
      case '-E':
        if (!service) return 'No such service';
        service.line = `-A ${words.slice(1).join(' ')}`;
        return undefined;
      case '-D':
        if (!service) return 'No such service';
        this.#services.delete(key);
        return undefined;
      case '-a':
        if (!service) return 'No such service';
        if (service.destinations.has(destination)) return 'Destination already exists';
        service.destinations.set(destination, line);
        return undefined;
      case '-e':
        if (!service?.destinations.has(destination)) return 'No such destination';
        service.destinations.set(destination, `-a ${words.slice(1).join(' ')}`);
        return undefined;
      case '-d':
        if (!service?.destinations.delete(destination)) return 'No such destination';
        return undefined;
      default:
        return 'Invalid command';
    }
  }
}

function protocolName(flag: string): string {
  return flag === '-u' ? 'UDP' : flag === '--sctp-service' ? 'SCTP' : 'TCP';
}

const IPTABLES_RESTORE = /^ip6?tables(-nft|-legacy)?-restore$/;
const IPTABLES_SAVE = /^ip6?tables(-nft|-legacy)?-save$/;
/** The xt_ipvs match of a rule, its options up to the target: the options never hold a quote. */
const IPVS_MATCH = /-m ipvs ([^"\n]+?)(?= -j )/g;
const IPVS_MATCH_COMMENT = 'ipvs-stand-in: ';
const IPVS_MATCH_AS_COMMENT = new RegExp(`-m comment --comment "?${IPVS_MATCH_COMMENT}([^"\\n]+?)"?(?= -j )`, 'g');

/** proxy-ipvs's runner on a host without IPVS: ipvsadm and what needs ip_vs stand in, the rest is real. */
export class IpvsStandInRunner implements CommandRunner {
  readonly ipvs = new IpvsStandIn();
  readonly #real: CommandRunner;

  constructor(real: CommandRunner = new ExecRunner()) {
    this.#real = real;
  }

  async run(spec: CommandSpec): Promise<CommandResult> {
    const args = spec.args ?? [];
    if (spec.command === 'ipvsadm') return this.#ipvsadm(args, spec.input ?? '');
    if (spec.command === 'sysctl' && args.some((arg) => arg.startsWith('net.ipv4.vs.'))) return answer('');
    if (spec.command === 'ip' && args.includes(DUMMY_INTERFACE) && args.at(-2) === 'type' && args.at(-1) === 'dummy') {
      return this.#real.run({ ...spec, args: [...args.slice(0, -1), 'bridge'] });
    }
    if (IPTABLES_RESTORE.test(spec.command) && spec.input !== undefined) {
      return this.#real.run({ ...spec, input: spec.input.replace(IPVS_MATCH, (_, options: string) => `-m comment --comment "${IPVS_MATCH_COMMENT}${options}"`) });
    }
    if (IPTABLES_SAVE.test(spec.command)) {
      const saved = await this.#real.run(spec);
      return { ...saved, stdout: saved.stdout.replace(IPVS_MATCH_AS_COMMENT, (_, options: string) => `-m ipvs ${options}`) };
    }
    return this.#real.run(spec);
  }

  #ipvsadm(args: readonly string[], input: string): CommandResult {
    const line = args.join(' ');
    if (line === '-R') {
      const { stderr, exitCode } = this.ipvs.restore(input);
      return { ...answer(''), stderr, exitCode };
    }
    if (line === '-S -n') return answer(this.ipvs.save());
    if (line === '-L -n') return answer(this.ipvs.list());
    if (line === '-L -n --stats --exact') return answer(this.ipvs.stats());
    if (line === '-L -c -n') return answer('IPVS connection entries\npro expire state       source             virtual            destination');
    if (line === '-C') this.ipvs.clear();
    // --set (timeouts) and anything else: accepted, as the kernel accepts them.
    return answer('');
  }
}

function answer(stdout: string): CommandResult {
  return { stdout, stderr: '', exitCode: 0, durationMs: 0 };
}

/** The owner of nodeRoutesPlugin's routes in route-sync. */
export const NODE_ROUTES = 'node-routes';

const nodeRoutesOptions = z.strictObject({
  /** The next hop of every route: the agent's one neighbour in the measurement's namespace. */
  gateway: z.ipv4(),
});

/**
 * A routing plugin without BGP: every other Node's pod CIDRs (IPv4), each via `gateway`, handed to route-sync on
 * every change of the Nodes. Its routes are what route-sync programs; it keeps nothing of its own between syncs.
 */
export const nodeRoutesPlugin: ControllerPlugin<z.infer<typeof nodeRoutesOptions>> = definePlugin({
  name: NODE_ROUTES,
  host: '^1.0.0',
  requires: [ROUTE_SYNC_CONTROLLER],
  options: nodeRoutesOptions,
  create(ctx, options) {
    const kube = ctx.services.get(KubeServices);
    const routeSync = ctx.services.get(routeSyncServiceKey);
    const nodes = kube.informers.nodes();
    let unsubscribe: (() => void) | undefined;
    return createSyncController(ctx, {
      name: NODE_ROUTES,
      syncPeriodMs: 3_600_000,
      start: ({ requestSync }) => {
        unsubscribe = kube.informers.onChange('nodes', () => requestSync('nodes changed'));
      },
      sync: async () => {
        const routes: InjectedRoute[] = [];
        for (const node of nodes.list()) {
          if (node.metadata?.name === ctx.nodeName) continue;
          const cidrs = node.spec?.podCIDRs ?? (node.spec?.podCIDR ? [node.spec.podCIDR] : []);
          for (const destination of cidrs) if (!destination.includes(':')) routes.push({ destination, gateway: options.gateway });
        }
        routeSync.setRoutes(NODE_ROUTES, routes);
      },
      stop: () => unsubscribe?.(),
    });
  },
});
