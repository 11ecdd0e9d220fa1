import { readFile, stat } from 'node:fs/promises';
import type { KubeConfig, User } from '@kubernetes/client-node';

/** The auth provider name of a user whose bearer token is read from a file (kubeadm's `tokenFile`, in-cluster). */
export const TOKEN_FILE_PROVIDER = 'kube-router-token-file';

/** Re-read at least this often even when the file looks unchanged, as client-go re-reads a token file. */
const REREAD_MS = 60_000;

/** `user` sending the token in `path` with every request. */
export function tokenFileUser(user: User, path: string): User {
  const { token: _inline, ...rest } = user;
  return { ...rest, authProvider: { name: TOKEN_FILE_PROVIDER, config: { path } } };
}

/**
 * Sends a token file's token, re-read as soon as the file changes (its inode, size or modification time: the kubelet
 * swaps a projected token atomically) and at least every minute, and trimmed of whitespace as client-go trims it.
 * client-node's own tokenFile provider re-reads only every minute and sends a trailing newline along: after a
 * rotation that kube-apiserver enforced at once, every request failed for up to a minute.
 */
class TokenFileAuthenticator {
  readonly #cache = new Map<string, { token: string; version: string; readAt: number }>();

  isAuthProvider(user: User): boolean {
    return user.authProvider?.name === TOKEN_FILE_PROVIDER && typeof user.authProvider.config?.path === 'string';
  }

  async applyAuthentication(user: User, options: { headers?: Record<string, unknown> }): Promise<void> {
    const path = user.authProvider!.config.path as string;
    let cached = this.#cache.get(path);
    try {
      const info = await stat(path);
      const version = `${info.ino}:${info.size}:${info.mtimeMs}`;
      if (cached === undefined || cached.version !== version || Date.now() - cached.readAt > REREAD_MS) {
        cached = { token: (await readFile(path, 'utf8')).trim(), version, readAt: Date.now() };
        this.#cache.set(path, cached);
      }
    } catch (error) {
      // Mid-swap or briefly unreadable: the token read last still goes, as a rotated one stays valid for a while.
      if (cached === undefined) throw new Error(`cannot read the bearer token file ${path}: ${(error as Error).message}`, { cause: error });
    }
    options.headers ??= {};
    options.headers.Authorization = `Bearer ${cached.token}`;
  }
}

/** Lets `kubeConfig` serve users made with tokenFileUser. */
export function addTokenFileAuthenticator(kubeConfig: KubeConfig): void {
  kubeConfig.addAuthenticator(new TokenFileAuthenticator());
}
