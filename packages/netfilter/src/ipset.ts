import { blamedInputLine } from './blamed-line.js';
import { CommandError } from './command.js';
import type { CommandResult, CommandRunner } from './command.js';
import { IpsetScript } from './ipset-script.js';
import type { IpsetMember, IpsetSpec } from './ipset-script.js';
import { parseIpsetNames, parseIpsetSave } from './ipset-save.js';
import type { SavedIpset } from './ipset-save.js';
import { toolLocks } from './mutex.js';
import type { Mutex } from './mutex.js';

export interface IpsetOptions {
  readonly runner: CommandRunner;
  readonly netns?: string;
  readonly timeoutMs?: number;
  readonly lock?: Mutex;
  /** The ipset binary. */
  readonly command?: string;
}

/** How many listings saveOwn takes when a set it lists is gone by the time it saves it. */
const SAVE_OWN_ATTEMPTS = 3;

/** The ipset tool, optionally inside a network namespace, serialised by the process-wide ipset mutex. */
export class Ipset {
  readonly netns: string | undefined;
  readonly #runner: CommandRunner;
  readonly #timeoutMs: number;
  readonly #lock: Mutex;
  readonly #command: string;

  constructor(options: IpsetOptions) {
    this.#runner = options.runner;
    this.netns = options.netns;
    this.#timeoutMs = options.timeoutMs ?? 60_000;
    this.#lock = options.lock ?? toolLocks.ipset;
    this.#command = options.command ?? 'ipset';
  }

  /** Applies a script with `ipset restore -exist`; a rejected script fails with the blamed line attached. */
  async restore(script: string | IpsetScript): Promise<void> {
    const input = script.toString();
    if (input === '') return;
    try {
      await this.#run(['restore', '-exist'], input);
    } catch (error) {
      if (!(error instanceof CommandError)) throw error;
      const blamed = blamedInputLine(error.stderr, input);
      throw blamed ? error.withHint(`input line ${blamed.line}: ${blamed.text}`) : error;
    }
  }

  async listNames(): Promise<string[]> {
    return parseIpsetNames((await this.#run(['list', '-n'])).stdout);
  }

  /** `ipset save` of every set, or of one. */
  async save(name?: string): Promise<SavedIpset[]> {
    return parseIpsetSave((await this.#run(name === undefined ? ['save'] : ['save', name])).stdout);
  }

  /**
   * `ipset save` of the sets `own` picks out, by name, and the names of every set. A save of every set holds each set
   * busy in the kernel while it is dumped, and another tool that swaps or destroys a set of its own at that moment gets
   * EBUSY (kube-router #1918's neighbours, Istio's CNI); `ipset list -n` holds each only while its name is read. Both
   * commands run under one hold of the mutex, so no set of this process comes or goes between them.
   */
  async saveOwn(own: (name: string) => boolean): Promise<{ sets: SavedIpset[]; names: string[] }> {
    return this.#lock.runExclusive(async () => {
      // Another process may destroy one of them between the listing and the save (a person, an old agent beside
      // this one): the listing is taken again, a few times, as a save of every set would simply not have shown it.
      for (let attempt = 1; ; attempt++) {
        const names = parseIpsetNames((await this.#runUnlocked(['list', '-n'])).stdout);
        const wanted = names.filter(own);
        if (wanted.length === 0) return { sets: [], names };
        try {
          const saved = await this.#runUnlocked(['restore'], wanted.map((name) => `save ${name}\n`).join(''));
          return { sets: parseIpsetSave(saved.stdout), names };
        } catch (error) {
          if (attempt >= SAVE_OWN_ATTEMPTS || !(error instanceof CommandError) || !/does not exist/.test(error.stderr)) throw error;
        }
      }
    });
  }

  /** Replaces a set's members atomically through a temporary set, creating the set first if it does not exist. */
  async replace(spec: IpsetSpec, members: Iterable<IpsetMember>, tempName: string): Promise<void> {
    const existing = new Set(await this.listNames());
    const script = new IpsetScript();
    if (existing.has(tempName)) script.destroy(tempName);
    await this.restore(script.replaceMembers(spec, members, { tempName, createTarget: !existing.has(spec.name) }));
  }

  async destroy(name: string): Promise<void> {
    await this.#run(['destroy', name]);
  }

  /** Runs ipset with any arguments. */
  run(args: readonly string[], input?: string): Promise<CommandResult> {
    return this.#run(args, input);
  }

  #run(args: readonly string[], input?: string): Promise<CommandResult> {
    return this.#lock.runExclusive(() => this.#runUnlocked(args, input));
  }

  #runUnlocked(args: readonly string[], input?: string): Promise<CommandResult> {
    return this.#runner.run({ command: this.#command, args, input, netns: this.netns, timeoutMs: this.#timeoutMs });
  }
}
