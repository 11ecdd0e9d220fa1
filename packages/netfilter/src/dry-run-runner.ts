import { CommandError, formatCommandLine, type CommandResult, type CommandRunner, type CommandSpec } from './command.js';

/** iptables-save, ip6tables-save and their -nft / -legacy variants: they only print. */
const IPTABLES_SAVE = /^ip6?tables(-nft|-legacy)?-save$/;

/**
 * Whether a command only reads the kernel. A closed list on purpose: a command this does not know, or one that is
 * given input to feed the kernel, is a write until someone adds it here.
 */
export function isReadCommand(spec: CommandSpec): boolean {
  if (spec.input !== undefined) return false;
  const args = spec.args ?? [];
  const words = args.filter((arg) => !arg.startsWith('-'));
  if (IPTABLES_SAVE.test(spec.command)) return true;
  if (/^ip6?tables(-nft|-legacy)?$/.test(spec.command)) {
    // -S/-L list, -C checks; anything else (-A, -D, -N, -F, -X, -P, -R, -I, -Z) changes the table.
    return args.some((arg) => ['-S', '--list-rules', '-L', '--list', '-C', '--check'].includes(arg)) && !args.includes('-Z') && !args.includes('--zero');
  }
  switch (spec.command) {
    case 'ipset':
      return ['save', 'list', '-L', '-S', '-n'].includes(args[0] ?? '') || (args[0] === '-o' && ['save', 'list'].includes(args[2] ?? ''));
    case 'nft':
      // `nft [-j|-a|-n|-s ...] list ...`: never -f (a script) nor add/delete/flush/create/insert/replace.
      return words[0] === 'list' && !args.includes('-f') && !args.includes('--file');
    case 'ip':
      return ['show', 'list', 'get'].includes(words[1] ?? '') || (words.length === 1 && ['route', 'addr', 'address', 'link', 'rule', 'neigh'].includes(words[0] ?? ''));
    case 'ipvsadm':
      return args.some((arg) => ['-S', '--save', '-L', '-l', '--list'].includes(arg)) && !args.includes('--zero') && !args.includes('-Z');
    default:
      return false;
  }
}

export interface DryRunRunnerOptions {
  /**
   * The scratch network namespace that stands in for the node: commands in it run, writes included. Every other
   * command must be a read (isReadCommand), or it is refused.
   */
  readonly scratchNetns?: string;
  /** Why a write is not run, for its CommandError (`kube-router diff changes nothing in the kernel`). */
  readonly reason?: string;
}

/**
 * A runner for previews (`kube-router diff`): reads run, writes to the scratch namespace run, and any other command is
 * refused with a CommandError before it starts, recorded in `refused`. It is the guard that keeps the node's kernel
 * unchanged even when a plugin's code path does something the preview did not expect.
 */
export class DryRunRunner implements CommandRunner {
  readonly refused: string[] = [];
  readonly #runner: CommandRunner;
  readonly #scratch: string | undefined;
  readonly #reason: string;

  constructor(runner: CommandRunner, options: DryRunRunnerOptions = {}) {
    this.#runner = runner;
    this.#scratch = options.scratchNetns;
    this.#reason = options.reason ?? 'a dry run changes nothing in the kernel';
  }

  run(spec: CommandSpec): Promise<CommandResult> {
    if ((this.#scratch !== undefined && spec.netns === this.#scratch) || isReadCommand(spec)) return this.#runner.run(spec);
    const line = formatCommandLine(spec.command, spec.args ?? []);
    this.refused.push(spec.netns === undefined ? line : `${line} (netns ${spec.netns})`);
    return Promise.reject(
      new CommandError({
        command: spec.command,
        args: spec.args ?? [],
        exitCode: null,
        ...(spec.netns !== undefined && { netns: spec.netns }),
        notRunBecause: `${this.#reason} and this is not a command known to be a read`,
      }),
    );
  }
}
