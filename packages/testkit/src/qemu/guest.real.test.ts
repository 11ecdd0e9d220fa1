import { createServer, type AddressInfo, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommandError, hasTool } from '@kube-router/netfilter';
import { HOST_LINK, QemuGuest, guestUnavailableReason } from './index.js';

const unavailable = guestUnavailableReason();
/** The host forward's case alone needs socat. */
const noSocat = hasTool('socat') ? undefined : 'socat is not installed (apt-get install socat)';
/** Where the guest reaches the host's echo server through `hostForwards`. */
const FORWARDED = { guestAddress: '10.0.2.100', guestPort: 7000 };

describe.skipIf(unavailable !== undefined)(`QEMU guest tier${unavailable ? ` (skipped: ${unavailable})` : ''}`, () => {
  let guest: QemuGuest;
  /** A server of this host's, on loopback: it answers `host <line>` to each line. */
  let hostServer: Server;

  beforeAll(async () => {
    hostServer = createServer((socket) => {
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => socket.write(`host ${chunk}`));
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => hostServer.listen(0, '127.0.0.1', resolve));
    const hostPort = (hostServer.address() as AddressInfo).port;
    guest = await QemuGuest.boot({ hostForwards: noSocat ? [] : [{ ...FORWARDED, hostPort }] });
    console.info(`guest ${guest.info.kernelRelease} booted in ${guest.info.bootMs} ms (image ${guest.info.imageBuildMs} ms)`);
  }, 240_000);
  afterAll(async () => {
    await guest?.close();
    hostServer?.close();
  });

  it('boots a kernel with IPVS loaded and reports how long it took', async () => {
    expect(guest.info.kernelRelease).toMatch(/-cloud-amd64$/);
    expect(guest.info.bootMs).toBeGreaterThan(0);
    const { stdout } = await guest.run({ command: 'cat', args: ['/proc/net/ip_vs'] });
    expect(stdout).toContain('IP Virtual Server version');
  });

  it('programs IPVS with ipvsadm and reads it back', async () => {
    await guest.run({ command: 'ipvsadm', args: ['-A', '-t', '10.96.0.10:80', '-s', 'sh'] });
    await guest.run({ command: 'ipvsadm', args: ['-a', '-t', '10.96.0.10:80', '-r', '10.244.0.2:8080', '-m'] });
    const { stdout } = await guest.run({ command: 'ipvsadm', args: ['-Sn'] });
    expect(stdout).toContain('-A -t 10.96.0.10:80 -s sh');
    expect(stdout).toContain('-a -t 10.96.0.10:80 -r 10.244.0.2:8080 -m -w 1');
    await guest.run({ command: 'ipvsadm', args: ['-C'] });
  });

  it('creates a dummy interface and a network namespace, and runs node inside it', async () => {
    await guest.run({ command: 'ip', args: ['link', 'add', 'tipvs-dummy', 'type', 'dummy'] });
    const { stdout: links } = await guest.run({ command: 'ip', args: ['-o', 'link', 'show', 'tipvs-dummy'] });
    expect(links).toContain('tipvs-dummy');
    await guest.run({ command: 'ip', args: ['netns', 'add', 'tipvs-ns'] });
    const { stdout } = await guest.run({ command: 'node', args: ['-e', 'console.log(require("os").networkInterfaces().lo ? "lo" : "none")'], netns: 'tipvs-ns' });
    expect(stdout.trim()).toBe('none'); // a fresh namespace's loopback is down
    await guest.sh('ip netns del tipvs-ns; ip link del tipvs-dummy');
  });

  it('fails a command with its exit code and stderr, as ExecRunner does', async () => {
    const failure = await guest.run({ command: 'ipvsadm', args: ['-A', '-t', '10.96.0.11:80', '-s', 'nosuch'] }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(CommandError);
    expect((failure as CommandError).exitCode).not.toBe(0);
    expect((failure as CommandError).message).toMatch(/ipvsadm -A -t 10.96.0.11:80 -s nosuch exited with code \d+; stderr: .+/);
    await expect(guest.run({ command: 'sleep', args: ['5'], timeoutMs: 200 })).rejects.toMatchObject({ timedOut: true });
  });

  it('keeps background processes and files and brings their output out', async () => {
    await guest.writeFile('/tmp/tipvs/hello.mjs', 'console.log("hello from", process.argv[2]); setInterval(() => {}, 1000);');
    const server = await guest.spawn({ command: 'node', args: ['/tmp/tipvs/hello.mjs', 'guest'] });
    let output = await server.output();
    for (let i = 0; i < 100 && !output.stdout; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      output = await server.output();
    }
    expect(output.stdout).toBe('hello from guest\n');
    expect(output.exit).toBeNull();
    await server.stop();
    expect(await guest.readFile('/tmp/tipvs/hello.mjs')).toContain('hello from');
  });

  it('talks to an interactive process line by line, and sees it end when its stdin closes or it is killed', async () => {
    // cat echoes each line back: what was written comes out, in order, and closing stdin ends it with code 0.
    const cat = await guest.spawnInteractive({ command: 'cat' });
    const lines: string[] = [];
    cat.stdout.setEncoding('utf8').on('data', (chunk: string) => lines.push(...chunk.split('\n').filter(Boolean)));
    const closed = new Promise<[number | null, string | null]>((resolve) => cat.once('close', (code, signal) => resolve([code, signal])));
    const started = performance.now();
    cat.stdin.write('one\n');
    for (let i = 0; i < 100 && lines.length < 1; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    const roundTripMs = performance.now() - started;
    cat.stdin.write('two\n');
    cat.stdin.end();
    expect(await closed).toEqual([0, null]);
    expect(lines).toEqual(['one', 'two']);
    // An answer comes back as it is written, not after a read's full wait.
    expect(roundTripMs).toBeLessThan(900);
    const sleeper = await guest.spawnInteractive({ command: 'sleep', args: ['600'] });
    const killed = new Promise<unknown>((resolve) => sleeper.once('close', (code, signal) => resolve(code ?? signal)));
    sleeper.kill();
    expect(await killed).toBe('SIGKILL');
  });

  it.skipIf(noSocat !== undefined)(`reaches this host's forwarded port, and no other port of the host${noSocat ? ` (skipped: ${noSocat})` : ''}`, async () => {
    await guest.sh(`ip link set ${HOST_LINK.interface} up && ip addr add ${HOST_LINK.guestAddress}/24 dev ${HOST_LINK.interface}`);
    // One line out, the host's answer back, through QEMU's user network and socat.
    const exchange = (host: string, port: number) =>
      guest.run({
        command: 'node',
        args: ['-e', `const s = require('net').connect(${port}, '${host}', () => s.write('ping\\n'));
          s.setEncoding('utf8'); s.on('data', (d) => { process.stdout.write(d); process.exit(0); });
          s.on('error', (e) => { console.log(e.code); process.exit(0); }); setTimeout(() => { console.log('timeout'); process.exit(0); }, 3000);`],
        timeoutMs: 20_000,
      });
    expect((await exchange(FORWARDED.guestAddress, FORWARDED.guestPort)).stdout.trim()).toBe('host ping');
    // The user network's gateway is this host's loopback; restrict=on keeps the guest from reaching it directly.
    const port = (hostServer.address() as AddressInfo).port;
    expect((await exchange(HOST_LINK.gateway, port)).stdout.trim()).not.toContain('host ping');
  });
});
