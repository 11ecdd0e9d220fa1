import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findExecutable } from '@kube-router/netfilter';

/** Where scripts/setup.sh unpacks Debian's cloud kernel package; KUBE_ROUTER_GUEST_DIR overrides it. */
export const DEFAULT_GUEST_DIR = '/var/cache/kube-router-ts/guest';

export interface GuestKernel {
  readonly release: string;
  readonly vmlinuz: string;
  /** The kernel package's /lib/modules/<release>. */
  readonly modulesDir: string;
}

export interface GuestImage {
  readonly kernel: GuestKernel;
  /** An uncompressed newc cpio: decompressing 150 MB under TCG would cost more than reading it. */
  readonly initramfs: string;
}

export function guestDir(): string {
  return process.env.KUBE_ROUTER_GUEST_DIR ?? DEFAULT_GUEST_DIR;
}

/** The unpacked cloud kernel, or undefined with the reason when setup.sh has not fetched it. */
export function findGuestKernel(dir = guestDir()): GuestKernel | { missing: string } {
  const boot = join(dir, 'root', 'boot');
  const vmlinuz = existsSync(boot) ? readdirSync(boot).find((name) => /^vmlinuz-.*-cloud-amd64$/.test(name)) : undefined;
  if (!vmlinuz) return { missing: `no vmlinuz-*-cloud-amd64 under ${boot} (scripts/setup.sh fetches it)` };
  const release = vmlinuz.slice('vmlinuz-'.length);
  const modulesDir = join(dir, 'root', 'lib', 'modules', release);
  if (!existsSync(join(modulesDir, 'modules.dep'))) return { missing: `no modules.dep in ${modulesDir}` };
  return { release, vmlinuz: join(boot, vmlinuz), modulesDir };
}

/** Host tools copied into the guest with their shared libraries. Missing optional ones are left out. */
const REQUIRED_TOOLS = ['ipvsadm', 'ipset', 'ip', 'xtables-nft-multi', 'xtables-legacy-multi'];
const OPTIONAL_TOOLS = ['conntrack', 'nft'];
const IPTABLES_NAMES = ['iptables', 'ip6tables'].flatMap((base) =>
  ['', '-save', '-restore'].flatMap((tool) => [`${base}${tool}`, `${base}-nft${tool}`, `${base}-legacy${tool}`]),
);
/** Modules loaded at boot; the rest of kernel/net is in the image for the kernel to load on demand (xt_*, schedulers). */
export const BOOT_MODULES = [
  'virtio_pci',
  'virtio_console',
  // The NIC of GuestOptions.hostForwards; no udev in the image loads it when the device appears.
  'virtio_net',
  'ip_vs',
  'ip_vs_rr',
  'nf_conntrack',
  'nf_nat',
  'dummy',
  'veth',
  'ipip',
  'ip_set',
];
const MODULE_DIRS = ['kernel/net', 'kernel/lib', 'kernel/crypto', 'kernel/arch', 'kernel/drivers/virtio', 'kernel/drivers/char'];
const MODULE_FILES = ['kernel/drivers/net/dummy.ko', 'kernel/drivers/net/veth.ko', 'kernel/drivers/net/virtio_net.ko', 'kernel/drivers/net/net_failover.ko'];

const here = dirname(fileURLToPath(import.meta.url));
const agentScript = join(here, 'guest-agent.mjs');

const INIT_SCRIPT = (release: string): string => `#!/bin/busybox sh
/bin/busybox --install -s /bin
# The real tools come before busybox's applets of the same name (ip, sysctl, modprobe stays busybox).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mkdir -p /run/netns /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
echo /bin/modprobe > /proc/sys/kernel/modprobe
for m in ${BOOT_MODULES.join(' ')}; do modprobe "$m" || echo "guest: modprobe $m failed"; done
ip link set lo up
port=
for p in /sys/class/virtio-ports/*; do
  [ "$(cat "$p/name" 2>/dev/null)" = kube-router.rpc ] && port=/dev/$(basename "$p")
done
echo "guest: kernel ${release} up after $(cut -d' ' -f1 /proc/uptime)s, rpc port \${port:-missing}"
[ -n "$port" ] && node /guest-agent.mjs "$port"
echo "guest: agent exited with $?"
poweroff -f
`;

/**
 * Builds (once, then reuses from the cache directory) the initramfs: busybox, node, the netfilter and IPVS tools with
 * their libraries, the kernel's network modules and the guest agent. The cache key covers every input, so an updated
 * host tool or agent script makes a new image.
 */
export function buildGuestImage(kernel: GuestKernel, cacheDir = guestDir()): GuestImage {
  const busybox = '/bin/busybox';
  if (!isStatic(busybox)) throw new Error(`${busybox} is not statically linked: install busybox-static`);
  const tools = [
    ...REQUIRED_TOOLS.map((name) => requireTool(name)),
    ...OPTIONAL_TOOLS.map((name) => findExecutable(name)).filter((path): path is string => path !== undefined),
  ];
  const node = process.execPath;
  const init = INIT_SCRIPT(kernel.release);
  const key = createHash('sha256')
    .update([kernel.vmlinuz, statSync(kernel.vmlinuz).mtimeMs, init, readFileSync(agentScript, 'utf8')].join('\n'))
    .update([busybox, node, ...tools].map((path) => `${path}:${statSync(path).size}:${statSync(path).mtimeMs}`).join('\n'))
    .digest('hex')
    .slice(0, 16);
  const initramfs = join(cacheDir, `initramfs-${kernel.release}-${key}.cpio`);
  if (existsSync(initramfs)) return { kernel, initramfs };

  mkdirSync(cacheDir, { recursive: true });
  const staging = mkdtempSync(join(cacheDir, 'staging-'));
  try {
    for (const dir of ['bin', 'sbin', 'usr/bin', 'usr/sbin', 'proc', 'sys', 'dev', 'tmp', 'run', 'etc', 'var', 'root']) {
      mkdirSync(join(staging, dir), { recursive: true });
    }
    symlinkSync('../run', join(staging, 'var/run'));
    copyFileSync(busybox, join(staging, 'bin/busybox'));
    const libraries = new Set<string>();
    const copyExecutable = (path: string, target: string): void => {
      copyFileSync(realpathSync(path), join(staging, target));
      chmodSync(join(staging, target), 0o755);
      for (const library of sharedLibraries(path)) libraries.add(library);
    };
    copyExecutable(node, 'usr/bin/node');
    for (const tool of tools) copyExecutable(tool, `usr/sbin/${tool.split('/').pop()}`);
    for (const name of IPTABLES_NAMES) {
      symlinkSync(name.includes('legacy') ? 'xtables-legacy-multi' : 'xtables-nft-multi', join(staging, 'usr/sbin', name));
    }
    // iptables loads its matches and targets with dlopen, so ldd of the binary does not name them.
    const xtables = '/usr/lib/x86_64-linux-gnu/xtables';
    if (existsSync(xtables)) {
      mkdirSync(join(staging, xtables), { recursive: true });
      for (const extension of readdirSync(xtables)) {
        copyFileSync(join(xtables, extension), join(staging, xtables, extension));
        for (const library of sharedLibraries(join(xtables, extension))) libraries.add(library);
      }
    }
    for (const library of libraries) {
      mkdirSync(join(staging, dirname(library)), { recursive: true });
      copyFileSync(realpathSync(library), join(staging, library));
    }
    for (const file of ['/etc/protocols', '/etc/services', '/etc/ethertypes']) {
      if (existsSync(file)) copyFileSync(file, join(staging, file));
    }
    writeFileSync(join(staging, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
    writeFileSync(join(staging, 'etc/group'), 'root:x:0:\n');
    copyModules(kernel, staging);
    copyFileSync(agentScript, join(staging, 'guest-agent.mjs'));
    writeFileSync(join(staging, 'init'), init, { mode: 0o755 });

    const partial = `${initramfs}.partial-${process.pid}`;
    execFileSync('sh', ['-c', `cd "${staging}" && find . -print0 | cpio --null --quiet -o -H newc -R 0:0 > "${partial}"`], {
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 120_000,
    });
    renameSync(partial, initramfs);
    // Images of earlier inputs are 150 MB each and never used again; a qemu still reading one keeps its open file.
    for (const file of readdirSync(cacheDir)) {
      if (/^initramfs-.*\.cpio$/.test(file) && join(cacheDir, file) !== initramfs) rmSync(join(cacheDir, file), { force: true });
    }
    return { kernel, initramfs };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

function copyModules(kernel: GuestKernel, staging: string): void {
  const target = join(staging, 'lib/modules', kernel.release);
  mkdirSync(target, { recursive: true });
  for (const file of readdirSync(kernel.modulesDir)) {
    if (file.startsWith('modules.')) copyFileSync(join(kernel.modulesDir, file), join(target, file));
  }
  for (const dir of MODULE_DIRS) {
    const source = join(kernel.modulesDir, dir);
    if (!existsSync(source)) continue;
    mkdirSync(dirname(join(target, dir)), { recursive: true });
    execFileSync('cp', ['-a', source, join(target, dir)], { timeout: 60_000 });
  }
  for (const file of MODULE_FILES) {
    mkdirSync(join(target, dirname(file)), { recursive: true });
    copyFileSync(join(kernel.modulesDir, file), join(target, file));
  }
}

function sharedLibraries(path: string): string[] {
  let output: string;
  try {
    output = execFileSync('ldd', [path], { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return []; // "not a dynamic executable"
  }
  return [...output.matchAll(/(?:=>\s*)?(\/\S+)\s+\(0x/g)].map((match) => match[1] as string);
}

function isStatic(path: string): boolean {
  return existsSync(path) && sharedLibraries(path).length === 0;
}

function requireTool(name: string): string {
  const path = findExecutable(name);
  if (!path) throw new Error(`${name} is not installed on the host; the guest image copies it (scripts/setup.sh installs it)`);
  return path;
}
