import { createHash, createSign, randomBytes } from 'node:crypto';

/**
 * Rules of per-user git connections and GitHub App credentials, without I/O: the OAuth
 * endpoints of the common hosts, PKCE, what a token endpoint's answer means, the JWT a GitHub App signs.
 */

export type UserConnections = 'off' | 'optional' | 'required';
export const USER_CONNECTION_MODES: readonly UserConnections[] = ['off', 'optional', 'required'];

export type OAuthPreset = 'github' | 'gitlab' | 'gitea';
export const OAUTH_PRESETS: readonly OAuthPreset[] = ['github', 'gitlab', 'gitea'];

/** A host's OAuth client as stored (its secret sealed apart). */
export interface GitOAuthClient {
  clientId: string;
  authorizeUrl: string;
  tokenUrl: string;
  /** The host's "who am I" API (JSON with login or username); empty: the account is not looked up. */
  userUrl: string;
  scopes: string;
}

/**
 * The endpoints of a well-known host's OAuth flow, from its base URL. GitHub's API lives on its own
 * host (api.github.com) for github.com and under /api/v3 for GitHub Enterprise Server.
 */
export function oauthPreset(preset: OAuthPreset, baseUrl: string): Omit<GitOAuthClient, 'clientId'> {
  const base = baseUrl.replace(/\/+$/, '');
  switch (preset) {
    case 'github':
      return { authorizeUrl: `${base}/login/oauth/authorize`, tokenUrl: `${base}/login/oauth/access_token`, userUrl: `${githubApiUrl(base)}/user`, scopes: 'repo' };
    case 'gitlab':
      return { authorizeUrl: `${base}/oauth/authorize`, tokenUrl: `${base}/oauth/token`, userUrl: `${base}/api/v4/user`, scopes: 'read_user read_repository write_repository' };
    case 'gitea':
      return { authorizeUrl: `${base}/login/oauth/authorize`, tokenUrl: `${base}/login/oauth/access_token`, userUrl: `${base}/api/v1/user`, scopes: 'read:user write:repository' };
  }
}

/** GitHub's REST API for a GitHub base URL: api.github.com for github.com, <base>/api/v3 for Enterprise Server. */
export function githubApiUrl(baseUrl: string): string {
  const u = new URL(baseUrl);
  return u.hostname === 'github.com' || u.hostname === 'www.github.com' ? 'https://api.github.com' : `${u.origin}/api/v3`;
}

/** An http(s) URL without credentials or fragment, as an OAuth endpoint must be; throws naming the field. */
export function checkEndpoint(field: string, text: string): string {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new Error(`${field} "${String(text).slice(0, 100)}" is not a URL`);
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error(`${field} must be an http or https URL`);
  if (u.username || u.password || u.hash) throw new Error(`${field} must not carry credentials or a fragment`);
  return u.href;
}

/** PKCE (RFC 7636, S256): the verifier kept on the control plane, the challenge sent with the user. */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** Where the person's browser goes to allow the connection. */
export function authorizeUrl(client: GitOAuthClient, o: { redirectUri: string; state: string; challenge: string }): string {
  const u = new URL(client.authorizeUrl);
  u.searchParams.set('response_type', 'code');
  u.searchParams.set('client_id', client.clientId);
  u.searchParams.set('redirect_uri', o.redirectUri);
  if (client.scopes) u.searchParams.set('scope', client.scopes);
  u.searchParams.set('state', o.state);
  u.searchParams.set('code_challenge', o.challenge);
  u.searchParams.set('code_challenge_method', 'S256');
  return u.href;
}

export interface TokenGrant {
  accessToken: string;
  refreshToken: string | null;
  /** Null when the host did not say (GitHub's classic OAuth tokens do not expire). */
  expiresAt: Date | null;
  scopes: string;
}

/**
 * A token endpoint's answer, JSON or form-encoded (GitHub answers form-encoded unless asked for JSON,
 * and says errors with a 200). Throws with the host's own error text, never with a token in it.
 */
export function parseTokenResponse(status: number, contentType: string, body: string, now: Date): TokenGrant {
  let fields: Record<string, unknown>;
  if (/json/i.test(contentType)) {
    try {
      fields = JSON.parse(body) as Record<string, unknown>;
    } catch {
      throw new Error(`the token endpoint answered HTTP ${status} with JSON that does not parse`);
    }
  } else fields = Object.fromEntries(new URLSearchParams(body));
  if (typeof fields.error === 'string') {
    const said = typeof fields.error_description === 'string' ? `: ${fields.error_description}` : '';
    throw new Error(`the host refused (${fields.error.slice(0, 100)}${said.slice(0, 300)})`);
  }
  if (status < 200 || status >= 300) throw new Error(`the token endpoint answered HTTP ${status}`);
  if (typeof fields.access_token !== 'string' || !fields.access_token) throw new Error('the token endpoint answered without an access_token');
  const type = typeof fields.token_type === 'string' ? fields.token_type.toLowerCase() : 'bearer';
  if (type !== 'bearer') throw new Error(`the token endpoint gave a token of type ${type.slice(0, 40)}, not bearer`);
  const expiresIn = Number(fields.expires_in);
  return {
    accessToken: fields.access_token,
    refreshToken: typeof fields.refresh_token === 'string' && fields.refresh_token ? fields.refresh_token : null,
    expiresAt: Number.isFinite(expiresIn) && expiresIn > 0 ? new Date(now.getTime() + expiresIn * 1000) : null,
    scopes: typeof fields.scope === 'string' ? fields.scope : '',
  };
}

/** The account's name from a host's user API (GitHub and Gitea: login; GitLab: username). */
export function accountOf(json: unknown): string {
  if (!json || typeof json !== 'object') return '';
  const o = json as Record<string, unknown>;
  for (const k of ['login', 'username', 'name']) if (typeof o[k] === 'string' && o[k]) return (o[k] as string).slice(0, 200);
  return '';
}

/** Refresh this long before an access token expires: a clone started now must not fail halfway for it. */
export const REFRESH_MARGIN_MS = 5 * 60_000;

export function needsRefresh(expiresAt: Date | null, now: Date): boolean {
  return expiresAt !== null && expiresAt.getTime() - REFRESH_MARGIN_MS <= now.getTime();
}

/**
 * The JWT a GitHub App signs to ask for an installation token (RS256; issued a minute in the past for
 * clock drift, valid for nine minutes: GitHub allows ten).
 */
export function githubAppJwt(appId: string, privateKeyPem: string, now: Date): string {
  const iat = Math.floor(now.getTime() / 1000) - 60;
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const unsigned = `${part({ alg: 'RS256', typ: 'JWT' })}.${part({ iat, exp: iat + 600 - 60, iss: appId })}`;
  const signature = createSign('RSA-SHA256').update(unsigned).sign(privateKeyPem).toString('base64url');
  return `${unsigned}.${signature}`;
}

/** How git sends a token to a host: Basic, with a user name the host accepts for that kind of token. */
export function basicAuthorization(username: string, secret: string): string {
  return `Basic ${Buffer.from(`${username}:${secret}`).toString('base64')}`;
}
