import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCommand } from '../lab/run-command.js';

/** A CA and a serving certificate it signed, PEM encoded: what kubeadm makes for kube-apiserver. */
export interface ServingCertificate {
  /** The CA certificate clients trust (kubeadm's ca.crt, also a service account's ca.crt). */
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
}

/**
 * Makes a fresh CA and a serving certificate for `hosts` (addresses or names, put in subjectAltName as kube-apiserver's
 * certificate has them) with openssl, valid for 30 days (a lab left running outlives a day), and new for every server.
 */
export async function createServingCertificate(hosts: readonly string[]): Promise<ServingCertificate> {
  const dir = await mkdtemp(join(tmpdir(), 'krt-apiserver-tls-'));
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => runCommand('openssl', args, { timeoutMs: 20_000 });
  const ecKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  try {
    await openssl('req', '-x509', ...ecKey, '-keyout', file('ca.key'), '-out', file('ca.crt'), '-days', '30', '-subj', '/CN=embedded-apiserver-ca');
    await openssl('req', ...ecKey, '-keyout', file('server.key'), '-out', file('server.csr'), '-subj', '/CN=kube-apiserver');
    const names = [...new Set(['localhost', '127.0.0.1', '::1', ...hosts])].map((host) => (isIP(host) ? `IP:${host}` : `DNS:${host}`));
    await writeFile(file('san.ext'), `subjectAltName=${names.join(',')}\nextendedKeyUsage=serverAuth\n`);
    await openssl(
      'x509', '-req', '-in', file('server.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial',
      '-out', file('server.crt'), '-days', '30', '-extfile', file('san.ext'),
    );
    const [ca, cert, key] = await Promise.all(['ca.crt', 'server.crt', 'server.key'].map((name) => readFile(file(name), 'utf8')));
    return { ca: ca!, cert: cert!, key: key! };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
