import type * as Oidc from 'openid-client';
import { isLoopback } from '../../lib/loopback.js';
import { UpstreamError, ValidationError } from '../../kernel/errors.js';

export interface OidcSettings {
  issuerUrl: string;
  clientId: string;
  clientSecret: string | null;
  /** Where the provider sends the browser back: <public URL>/v1/auth/callback. */
  redirectUri: string;
}

export interface OidcIdentity {
  subject: string;
  email: string | null;
  name: string | null;
  preferredUsername: string | null;
  claims: Record<string, unknown>;
}

/**
 * The identity provider, behind openid-client: discovery (cached once it succeeds), the authorization
 * URL with PKCE (S256), state and nonce, and the code exchange that checks all three and the ID token.
 */
export function createOidcClient(settings: OidcSettings) {
  // Loaded on the first sign-in, not at start-up: most requests never need it.
  let lib: Promise<typeof Oidc> | null = null;
  const load = () => (lib ??= import('openid-client'));
  let configuration: Promise<Oidc.Configuration> | null = null;
  const discover = () =>
    (configuration ??= load()
      .then((oidc) => oidc.discovery(new URL(settings.issuerUrl), settings.clientId, settings.clientSecret ?? undefined, undefined, {
        // Plain http only for a loopback issuer (development, tests); config parsing refuses any other.
        execute: isLoopback(new URL(settings.issuerUrl).hostname) ? [oidc.allowInsecureRequests] : [],
        timeout: 10,
      }))
      .catch((err: Error) => {
        configuration = null; // try again on the next sign-in
        throw new UpstreamError(`the identity provider at ${settings.issuerUrl} cannot be reached: ${err.message}`, { cause: err });
      }));

  return {
    settings,
    /** Starts a sign-in: returns the provider URL and the secrets to keep until the callback. */
    async authorizationUrl(): Promise<{ url: string; state: string; nonce: string; codeVerifier: string }> {
      const config = await discover();
      const oidc = await load();
      const codeVerifier = oidc.randomPKCECodeVerifier();
      const state = oidc.randomState();
      const nonce = oidc.randomNonce();
      const url = oidc.buildAuthorizationUrl(config, {
        redirect_uri: settings.redirectUri,
        scope: 'openid email profile',
        code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
        state,
        nonce,
      });
      return { url: url.href, state, nonce, codeVerifier };
    },

    /** Exchanges the code from the callback URL; fails unless state, nonce, PKCE and the ID token check out. */
    async exchange(callbackUrl: URL, expected: { state: string; nonce: string; codeVerifier: string }): Promise<OidcIdentity> {
      const config = await discover();
      const oidc = await load();
      let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
      try {
        tokens = await oidc.authorizationCodeGrant(config, callbackUrl, {
          expectedState: expected.state,
          expectedNonce: expected.nonce,
          pkceCodeVerifier: expected.codeVerifier,
          idTokenExpected: true,
        });
      } catch (err) {
        const e = err as Error & { code?: string; error?: string };
        // Protocol failures are the browser's (tampered or replayed callback); network ones are upstream.
        if (e.error || e.code?.startsWith('OAUTH_')) {
          throw new ValidationError(`sign-in failed: ${e.error ?? e.code}: ${e.message}`, { code: 'sign_in_failed', hint: 'Start the sign-in again.' });
        }
        throw new UpstreamError(`the identity provider did not complete the sign-in: ${e.message}`, { cause: err });
      }
      const claims = (tokens.claims() ?? {}) as Record<string, unknown>;
      const str = (k: string) => (typeof claims[k] === 'string' && claims[k] ? (claims[k] as string) : null);
      return {
        subject: String(claims.sub),
        // Entra puts the address in preferred_username or upn when `email` is not released.
        email: str('email') ?? (str('preferred_username')?.includes('@') ? str('preferred_username') : null) ?? str('upn'),
        name: str('name'),
        preferredUsername: str('preferred_username'),
        claims,
      };
    },
  };
}

export type OidcClient = ReturnType<typeof createOidcClient>;
