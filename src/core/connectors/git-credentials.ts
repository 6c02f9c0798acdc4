import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Database } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { GitConnectionRow, GitConnectionsRepo } from './git-connections.repo.js';
import type { GitHostRow } from './git-hosts.repo.js';
import { accountOf, basicAuthorization, githubAppJwt, needsRefresh, parseTokenResponse, REFRESH_MARGIN_MS, type TokenGrant } from './git-oauth-fns.js';

/** Calls to a host's token and user endpoints give up after this: a clone waits on them. */
const HOST_CALL_TIMEOUT_MS = 15_000;
/** User name git sends with an OAuth token: GitLab wants exactly this; GitHub and Gitea take any. */
const OAUTH_GIT_USERNAME = 'oauth2';
/**
 * How long a refresh's claim holds: twice the host call's bound, so only a process that died (or stalled
 * far past the call's timeout) loses it to another.
 */
const REFRESH_LEASE_MS = 2 * HOST_CALL_TIMEOUT_MS;
/** A refresh that failed is not tried again for the same token before this (the host is not asked at every git request). */
const REFRESH_RETRY_MS = 60_000;
/** How often a caller waiting for another process's refresh looks at the connection again. */
const REFRESH_POLL_MS = 200;

/**
 * What the gateway sends to the host for one agent request, or why it cannot. `fallback`: the person has
 * a connection the host would take in `optional` mode, but it could not be used (its refresh failed), so
 * this is the service credential instead: the person is told, and the audit says why.
 */
export type GitCredential = { authorization: string; as: 'service'; fallback?: string } | { authorization: string; as: 'user'; account: string } | { refused: string };

/** A person's access token, or why there is none to use: `gone` when the connection went away meanwhile. */
type UserToken = { token: string } | { problem: string } | { gone: true };

/**
 * The credentials the git gateway adds, all on the control plane: a host's service token, a
 * GitHub App's installation tokens (minted here, kept until shortly before they expire), and a person's
 * own OAuth tokens (refreshed here, one refresh at a time per connection because hosts rotate refresh
 * tokens: a claim in the connection's row, taken and released by single statements, never a transaction
 * or lock held across the call to the host, which may take 15 s; on the embedded database an open
 * transaction stops every other query). Also the OAuth calls of a connection's start (code exchange, user
 * lookup).
 */
export function createGitCredentials(deps: { db: Database; connections: GitConnectionsRepo; box: SecretBox; clock: Clock; fetch?: typeof fetch }) {
  const { db, connections, box, clock } = deps;
  const doFetch = deps.fetch ?? fetch;
  const appTokens = new Map<string, { token: string; expiresAt: number; key: string }>();
  const minting = new Map<string, Promise<string>>();
  /** Refreshes this process waits on, by connection: callers of one process share one. */
  const refreshing = new Map<string, Promise<UserToken>>();

  async function tokenEndpoint(host: GitHostRow, params: Record<string, string>): Promise<TokenGrant> {
    if (!host.oauth || !host.oauthSecretSealed) throw new Error(`${host.name} has no OAuth client`);
    const body = new URLSearchParams({ ...params, client_id: host.oauth.clientId, client_secret: box.open(host.oauthSecretSealed) });
    const res = await doFetch(host.oauth.tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body,
      redirect: 'error',
      signal: AbortSignal.timeout(HOST_CALL_TIMEOUT_MS),
    });
    return parseTokenResponse(res.status, res.headers.get('content-type') ?? '', await res.text(), clock.now());
  }

  /** A GitHub App installation token: cached per host and key until five minutes before it expires. */
  async function installationToken(host: GitHostRow): Promise<string> {
    const app = host.app!;
    const cached = appTokens.get(host.id);
    // The key's seal changes when an admin rotates it: a token of the old key is not reused.
    if (cached && cached.key === host.secretSealed && cached.expiresAt - REFRESH_MARGIN_MS > clock.now().getTime()) return cached.token;
    const pending = minting.get(host.id);
    if (pending) return pending;
    const p = (async () => {
      const jwt = githubAppJwt(app.appId, box.open(host.secretSealed!), clock.now());
      const res = await doFetch(`${app.apiUrl}/app/installations/${encodeURIComponent(app.installationId)}/access_tokens`, {
        method: 'POST',
        headers: { authorization: `Bearer ${jwt}`, accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28', 'user-agent': 'agentws-git-gateway' },
        redirect: 'error',
        signal: AbortSignal.timeout(HOST_CALL_TIMEOUT_MS),
      });
      const text = await res.text();
      let json: { token?: string; expires_at?: string; message?: string } = {};
      try {
        json = JSON.parse(text);
      } catch {
        /* said below */
      }
      if (res.status !== 201 || typeof json.token !== 'string') throw new Error(`GitHub refused the app's installation token (HTTP ${res.status}${json.message ? `: ${String(json.message).slice(0, 200)}` : ''})`);
      const expiresAt = Date.parse(json.expires_at ?? '') || clock.now().getTime() + 60 * 60_000;
      appTokens.set(host.id, { token: json.token, expiresAt, key: host.secretSealed! });
      return json.token;
    })();
    minting.set(host.id, p);
    try {
      return await p;
    } finally {
      minting.delete(host.id);
    }
  }

  async function serviceCredential(host: GitHostRow): Promise<GitCredential> {
    if (host.credentialKind === 'token' && host.secretSealed) return { authorization: basicAuthorization(host.username || 'x-access-token', box.open(host.secretSealed)), as: 'service' };
    if (host.credentialKind === 'github_app' && host.app && host.secretSealed) {
      try {
        return { authorization: basicAuthorization('x-access-token', await installationToken(host)), as: 'service' };
      } catch (err) {
        return { refused: `${host.name}: ${(err as Error).message}; ask an admin to check the GitHub App (aws connector git update ${host.name})` };
      }
    }
    return { refused: `${host.name} has no service credential: connect your own account to it in the dashboard (Connections)` };
  }

  /** A person's access token, refreshed first when it is about to expire; else why it cannot be used. */
  async function userToken(host: GitHostRow, conn: GitConnectionRow): Promise<UserToken> {
    if (!needsRefresh(conn.expiresAt, clock.now())) return { token: box.open(conn.accessSealed) };
    const pending = refreshing.get(conn.id);
    if (pending) return pending;
    const p = refreshed(host, conn).finally(() => refreshing.delete(conn.id));
    refreshing.set(conn.id, p);
    return p;
  }

  /**
   * The connection's token once refreshed: by this process when it takes the claim, else by whichever
   * process holds it (its outcome is read back from the row). A failure recorded for this token within
   * REFRESH_RETRY_MS is its answer without asking the host again.
   */
  async function refreshed(host: GitHostRow, first: GitConnectionRow): Promise<UserToken> {
    let conn: GitConnectionRow | null = first;
    // Bounded by rounds, not by the clock: a process that died mid-refresh frees its claim after the lease.
    for (let round = 0; round < (REFRESH_LEASE_MS + 5000) / REFRESH_POLL_MS; round++) {
      if (!conn) return { gone: true };
      const now = clock.now();
      // Refreshed meanwhile (by another process, or reconnected).
      if (!needsRefresh(conn.expiresAt, now)) return { token: box.open(conn.accessSealed) };
      if (!conn.refreshSealed) return { problem: 'its token expired and the host gave no refresh token' };
      if (conn.refreshFailedAt && now.getTime() - conn.refreshFailedAt.getTime() < REFRESH_RETRY_MS) return { problem: conn.refreshError ?? 'its refresh failed' };
      if (!conn.refreshLeaseUntil || conn.refreshLeaseUntil.getTime() <= now.getTime()) {
        const lease = randomUUID();
        const claimed = await connections.claimRefresh(db, conn.tenantId, conn.id, conn.accessSealed, lease, now, new Date(now.getTime() + REFRESH_LEASE_MS));
        if (claimed) return refreshClaimed(host, claimed, lease);
      }
      await sleep(REFRESH_POLL_MS);
      conn = await connections.find(db, first.tenantId, first.hostId, first.userId);
    }
    return { problem: 'another refresh of it did not finish' };
  }

  /** The host call, outside any transaction, then its outcome written over the token it started from. */
  async function refreshClaimed(host: GitHostRow, conn: GitConnectionRow, lease: string): Promise<UserToken> {
    let grant: TokenGrant;
    try {
      grant = await tokenEndpoint(host, { grant_type: 'refresh_token', refresh_token: box.open(conn.refreshSealed!) });
    } catch (err) {
      // The host's own words (parseTokenResponse never puts a token in them), or the network's.
      const why = (err as Error).name === 'TimeoutError' ? `${host.name} did not answer its token endpoint within ${HOST_CALL_TIMEOUT_MS / 1000} s` : (err as Error).message;
      await connections.refreshFailed(db, conn.tenantId, conn.id, conn.accessSealed, lease, clock.now(), why.slice(0, 500));
      return { problem: why };
    }
    const saved = await connections.saveRefreshed(db, conn.tenantId, conn.id, conn.accessSealed, lease, {
      accessSealed: box.seal(grant.accessToken),
      // Hosts that do not rotate refresh tokens answer without one: the old one stays good.
      refreshSealed: grant.refreshToken ? box.seal(grant.refreshToken) : conn.refreshSealed,
      expiresAt: grant.expiresAt,
      scopes: grant.scopes || conn.scopes,
    });
    if (saved) return { token: grant.accessToken };
    // Disconnected (or reconnected) while the host answered: these tokens are the old connection's.
    const now = await connections.find(db, conn.tenantId, conn.hostId, conn.userId);
    return now && !needsRefresh(now.expiresAt, clock.now()) ? { token: box.open(now.accessSealed) } : { gone: true };
  }

  return {
    tokenEndpoint,

    /** The account's name at the host, when the host has a user API; '' when it cannot be told. */
    async accountName(host: GitHostRow, accessToken: string): Promise<string> {
      if (!host.oauth?.userUrl) return '';
      try {
        const res = await doFetch(host.oauth.userUrl, {
          headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json', 'user-agent': 'agentws-git-gateway' },
          redirect: 'error',
          signal: AbortSignal.timeout(HOST_CALL_TIMEOUT_MS),
        });
        return res.ok ? accountOf(await res.json()) : '';
      } catch {
        return '';
      }
    },

    /**
     * What the gateway sends for this person's agent: their own connection where the host takes them
     * (required, or optional and connected), else the host's service credential.
     */
    async forAgent(host: GitHostRow, userId: string): Promise<GitCredential> {
      if (host.userConnections === 'off') return serviceCredential(host);
      const conn = await connections.find(db, host.tenantId, host.id, userId);
      const token = conn ? await userToken(host, conn) : ({ gone: true } as const);
      if ('token' in token) return { authorization: basicAuthorization(OAUTH_GIT_USERNAME, token.token), as: 'user', account: conn!.account };
      if ('problem' in token) {
        if (host.userConnections === 'required') return { refused: `your connection to ${host.name} could not be refreshed (${token.problem}): connect it again in the dashboard (Connections)` };
        // Optional: the service credential, said as such (the gateway tells the person and the audit).
        const service = await serviceCredential(host);
        return 'refused' in service ? service : { ...service, as: 'service', fallback: `your connection to ${host.name} could not be refreshed (${token.problem})` };
      }
      if (host.userConnections === 'required') return { refused: `${host.name} acts only as its users: connect your account to it in the dashboard (Connections)` };
      return serviceCredential(host);
    },

    /** Forgets cached installation tokens of a host (its app or key changed, or it was removed). */
    forget(hostId: string): void {
      appTokens.delete(hostId);
    },
  };
}

export type GitCredentials = ReturnType<typeof createGitCredentials>;
