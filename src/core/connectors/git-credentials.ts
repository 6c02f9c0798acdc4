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

/** What the gateway sends to the host for one agent request, or why it cannot. */
export type GitCredential = { authorization: string; as: 'service' } | { authorization: string; as: 'user'; account: string } | { refused: string };

/**
 * The credentials the git gateway adds (issue 28), all on the control plane: a host's service token, a
 * GitHub App's installation tokens (minted here, kept until shortly before they expire), and a person's
 * own OAuth tokens (refreshed here, one refresh at a time per connection, under a row lock, because hosts
 * rotate refresh tokens). Also the OAuth calls of a connection's start (code exchange, user lookup).
 */
export function createGitCredentials(deps: { db: Database; connections: GitConnectionsRepo; box: SecretBox; clock: Clock; fetch?: typeof fetch }) {
  const { db, connections, box, clock } = deps;
  const doFetch = deps.fetch ?? fetch;
  const appTokens = new Map<string, { token: string; expiresAt: number; key: string }>();
  const minting = new Map<string, Promise<string>>();

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

  /** A person's access token, refreshed first when it is about to expire; null when they must reconnect. */
  async function userToken(host: GitHostRow, conn: GitConnectionRow): Promise<string | null> {
    if (!needsRefresh(conn.expiresAt, clock.now())) return box.open(conn.accessSealed);
    if (!conn.refreshSealed) return null;
    return db.transaction(async (tx) => {
      const fresh = await connections.findForUpdate(tx, conn.tenantId, conn.hostId, conn.userId);
      if (!fresh?.refreshSealed) return null;
      // Another process refreshed while this one waited for the lock.
      if (!needsRefresh(fresh.expiresAt, clock.now())) return box.open(fresh.accessSealed);
      let grant: TokenGrant;
      try {
        grant = await tokenEndpoint(host, { grant_type: 'refresh_token', refresh_token: box.open(fresh.refreshSealed) });
      } catch {
        return null;
      }
      await connections.saveRefreshed(tx, fresh.id, {
        accessSealed: box.seal(grant.accessToken),
        // Hosts that do not rotate refresh tokens answer without one: the old one stays good.
        refreshSealed: grant.refreshToken ? box.seal(grant.refreshToken) : fresh.refreshSealed,
        expiresAt: grant.expiresAt,
        scopes: grant.scopes || fresh.scopes,
      });
      return grant.accessToken;
    });
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
      if (conn) {
        const token = await userToken(host, conn);
        if (token) return { authorization: basicAuthorization(OAUTH_GIT_USERNAME, token), as: 'user', account: conn.account };
        if (host.userConnections === 'required') return { refused: `your connection to ${host.name} has expired: connect it again in the dashboard (Connections)` };
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
