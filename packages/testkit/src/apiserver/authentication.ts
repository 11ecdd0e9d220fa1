/** Who a request comes from, as kube-apiserver's authenticators hand it to the authorizer (user.Info). */
export interface UserInfo {
  readonly name: string;
  readonly uid?: string;
  readonly groups: readonly string[];
}

/**
 * A bearer token the server accepts: a plain string is an administrator (a member of `system:masters`, whom
 * kube-apiserver never restricts); `{ token, user }` authenticates as that user, for RBAC.
 */
export type ApiToken = string | { readonly token: string; readonly user: UserInfo };

/** kube-apiserver's group of every authenticated request. */
export const AUTHENTICATED_GROUP = 'system:authenticated';
/** The group kube-apiserver lets through every authorizer, RBAC or not (user.SystemPrivilegedGroup). */
export const PRIVILEGED_GROUP = 'system:masters';

/** The user behind a plain-string token: kubeadm's admin.conf user. */
export const ADMIN_USER: UserInfo = { name: 'kubernetes-admin', groups: [PRIVILEGED_GROUP, AUTHENTICATED_GROUP] };

/** The user of a request without credentials while the server has no tokens (kube-apiserver's anonymous user). */
export const ANONYMOUS_USER: UserInfo = { name: 'system:anonymous', groups: ['system:unauthenticated'] };

/** serviceaccount.MakeUsername: `system:serviceaccount:<namespace>:<name>`. */
export function serviceAccountUsername(namespace: string, name: string): string {
  return `system:serviceaccount:${namespace}:${name}`;
}

/**
 * The user a ServiceAccount's token authenticates as: its username and the groups kube-apiserver adds
 * (`system:serviceaccounts`, `system:serviceaccounts:<namespace>`, `system:authenticated`).
 */
export function serviceAccountUser(namespace: string, name: string): UserInfo {
  return {
    name: serviceAccountUsername(namespace, name),
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, AUTHENTICATED_GROUP],
  };
}

export function tokenValue(token: ApiToken): string {
  return typeof token === 'string' ? token : token.token;
}

function userOf(token: ApiToken): UserInfo {
  if (typeof token === 'string') return ADMIN_USER;
  // Every authenticated user is in system:authenticated, whatever groups the caller listed.
  const groups = token.user.groups.includes(AUTHENTICATED_GROUP) ? token.user.groups : [...token.user.groups, AUTHENTICATED_GROUP];
  return { ...token.user, groups };
}

/** The accepted bearer tokens and whom each authenticates; undefined tokens: no authentication (anonymous). */
export class TokenAuthenticator {
  #tokens: readonly ApiToken[] | undefined;
  #users = new Map<string, UserInfo>();

  constructor(tokens: readonly ApiToken[] | undefined) {
    this.#tokens = undefined;
    this.set(tokens);
  }

  get tokens(): readonly ApiToken[] | undefined {
    return this.#tokens === undefined ? undefined : [...this.#tokens];
  }

  get enabled(): boolean {
    return this.#tokens !== undefined;
  }

  /** The token a client of the server sends by default: the first accepted one. */
  get firstToken(): string | undefined {
    const [first] = this.#tokens ?? [];
    return first === undefined ? undefined : tokenValue(first);
  }

  set(tokens: readonly ApiToken[] | undefined): void {
    const users = new Map<string, UserInfo>();
    for (const token of tokens ?? []) {
      const value = tokenValue(token);
      if (value === '') throw new Error('an API server token must not be empty');
      if (users.has(value)) throw new Error('an API server token is listed twice');
      users.set(value, userOf(token));
    }
    this.#tokens = tokens === undefined ? undefined : [...tokens];
    this.#users = users;
  }

  /**
   * The user an Authorization header authenticates, `undefined` when it is refused (401). Without tokens every
   * request is anonymous, as kube-apiserver with anonymous access on and no authenticator.
   */
  authenticate(authorization: string | undefined): UserInfo | undefined {
    if (this.#tokens === undefined) return ANONYMOUS_USER;
    if (authorization?.startsWith('Bearer ') !== true) return undefined;
    return this.#users.get(authorization.slice('Bearer '.length));
  }
}
