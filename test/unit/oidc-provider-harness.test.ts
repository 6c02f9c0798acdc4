import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserSignIn, startOidcProvider, type TestOidcProvider, type TestOidcUser } from '../helpers/oidc-provider.js';

/**
 * The test OpenID Connect provider harness on its own, without our service: a tiny relying party (openid-client v6,
 * authorization code + PKCE + state + nonce) signs users in through it via browserSignIn.
 */

const alice: TestOidcUser = {
  sub: 'alice-sub',
  email: 'alice@example.test',
  name: 'Alice Example',
  preferred_username: 'alice',
  tid: '11111111-2222-3333-4444-555555555555',
  groups: ['admins', 'devs'],
};
const bob: TestOidcUser = { sub: 'bob-sub', email: 'Bob@Example.test', name: 'Bob' };

interface PendingLogin {
  codeVerifier: string;
  state: string;
  nonce: string;
}

/** A minimal relying party: GET /login redirects to the provider; GET /cb completes the sign-in. */
async function startRelyingParty() {
  const server = http.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const pending = new Map<string, PendingLogin>();
  let config: client.Configuration | undefined;
  const cookie = (req: http.IncomingMessage, name: string) =>
    (req.headers.cookie ?? '')
      .split(';')
      .map((pair) => pair.trim().split('='))
      .find(([key]) => key === name)?.[1];

  server.on('request', (req, res) => {
    (async () => {
      if (!config) throw new Error('relying party not configured');
      const url = new URL(req.url ?? '/', base);
      if (url.pathname === '/login') {
        const tx = randomUUID();
        const login: PendingLogin = { codeVerifier: client.randomPKCECodeVerifier(), state: client.randomState(), nonce: client.randomNonce() };
        pending.set(tx, login);
        const authUrl = client.buildAuthorizationUrl(config, {
          redirect_uri: `${base}/cb`,
          scope: 'openid email profile',
          code_challenge: await client.calculatePKCECodeChallenge(login.codeVerifier),
          code_challenge_method: 'S256',
          state: login.state,
          nonce: login.nonce,
        });
        res.writeHead(302, { location: authUrl.href, 'set-cookie': `tx=${tx}; Path=/; HttpOnly; SameSite=Lax` }).end();
        return;
      }
      if (url.pathname === '/cb') {
        const tx = cookie(req, 'tx');
        const login = tx ? pending.get(tx) : undefined;
        if (!tx || !login) {
          res.writeHead(403, { 'content-type': 'text/plain' }).end('no pending login');
          return;
        }
        pending.delete(tx);
        let claims: client.IDToken;
        try {
          const tokens = await client.authorizationCodeGrant(config, url, {
            pkceCodeVerifier: login.codeVerifier,
            expectedState: login.state,
            expectedNonce: login.nonce,
          });
          claims = tokens.claims()!;
        } catch (err) {
          // openid-client's messages are generic; the OAuth error code or the cause says what went wrong.
          const e = err as Error & { code?: string; error?: string; cause?: unknown };
          const detail = [e.message, e.code, e.error, e.cause instanceof Error ? e.cause.message : undefined].filter(Boolean).join(' | ');
          res.writeHead(400, { 'content-type': 'text/plain' }).end(`sign-in failed: ${detail}`);
          return;
        }
        res
          .writeHead(302, {
            location: '/done',
            'set-cookie': [`sid=${claims.sub}; Path=/; HttpOnly; SameSite=Lax`, 'tx=; Path=/; Max-Age=0'],
            'content-type': 'application/json',
          })
          .end(JSON.stringify(claims));
        return;
      }
      res.writeHead(404).end();
    })().catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(err));
    });
  });

  return {
    base,
    configure(c: client.Configuration) {
      config = c;
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

describe('test OpenID Connect provider harness', () => {
  let rp: Awaited<ReturnType<typeof startRelyingParty>>;
  let idp: TestOidcProvider;

  beforeAll(async () => {
    rp = await startRelyingParty();
    idp = await startOidcProvider({ redirectUris: [`${rp.base}/cb`], users: [alice] });
    rp.configure(
      await client.discovery(new URL(idp.issuer), idp.clientId, idp.clientSecret, undefined, {
        execute: [client.allowInsecureRequests],
      }),
    );
  });

  afterAll(async () => {
    await idp?.close();
    await rp?.close();
  });

  it('signs a user in with authorization code + PKCE, claims in the ID token', async () => {
    const result = await browserSignIn(`${rp.base}/login`, alice.sub);

    expect(result.finalStatus).toBe(302);
    expect(result.location).toMatch(/\/done$/);
    expect(result.callbackUrl.startsWith(`${rp.base}/cb?`)).toBe(true);
    const query = new URL(result.callbackUrl).searchParams;
    expect(query.get('code')).toBeTruthy();
    expect(query.get('state')).toBeTruthy();
    expect(query.get('iss')).toBe(idp.issuer);
    expect(result.cookies.sid).toBe(alice.sub);
    expect(result.cookies.tx).toBeUndefined(); // cleared by Max-Age=0
    expect(result.setCookies.some((c) => c.startsWith(`sid=${alice.sub};`))).toBe(true);
    // Only our relying party's cookies, none of the provider's.
    expect(result.setCookies.every((c) => /^(sid|tx)=/.test(c))).toBe(true);

    const claims = JSON.parse(result.body) as Record<string, unknown>;
    expect(claims).toMatchObject({
      iss: idp.issuer,
      aud: idp.clientId,
      sub: alice.sub,
      email: alice.email,
      email_verified: true,
      name: alice.name,
      preferred_username: 'alice',
      tid: alice.tid,
      groups: alice.groups,
    });
  });

  it('makes the callback fail when the state is tampered with', async () => {
    const result = await browserSignIn(`${rp.base}/login`, alice.sub, {
      tamper: (url) => {
        url.searchParams.set('state', 'not-the-state');
      },
    });
    expect(result.finalStatus).toBe(400);
    expect(new URL(result.callbackUrl).searchParams.get('state')).toBe('not-the-state');
    expect(result.body).toMatch(/sign-in failed: .*"state"/);
    expect(result.cookies.sid).toBeUndefined();
  });

  it('makes the callback fail when the code is tampered with (the provider rejects it)', async () => {
    const result = await browserSignIn(`${rp.base}/login`, alice.sub, {
      tamper: (url) => {
        const next = new URL(url);
        next.searchParams.set('code', 'forged-code');
        return next;
      },
    });
    expect(result.finalStatus).toBe(400);
    expect(result.body).toMatch(/sign-in failed: .*invalid_grant/);
  });

  it('accepts the email as login, replaces users with setUsers and rejects unknown users', async () => {
    idp.setUsers([alice, bob]);
    const byEmail = await browserSignIn(`${rp.base}/login`, 'bob@example.test');
    expect(byEmail.finalStatus).toBe(302);
    expect(byEmail.cookies.sid).toBe(bob.sub);
    expect(JSON.parse(byEmail.body)).toMatchObject({ sub: bob.sub, email: bob.email, name: 'Bob' });

    idp.setUsers([alice]);
    await expect(browserSignIn(`${rp.base}/login`, bob.sub)).rejects.toThrow(/did not accept login "bob-sub" \(unknown user bob-sub\)/);
  });

  it('takes new redirect URIs with setRedirectUris', async () => {
    idp.setRedirectUris(['http://127.0.0.1:1/elsewhere']);
    try {
      await expect(browserSignIn(`${rp.base}/login`, alice.sub)).rejects.toThrow(/redirect_uri/);
    } finally {
      idp.setRedirectUris([`${rp.base}/cb`]);
    }
    expect((await browserSignIn(`${rp.base}/login`, alice.sub)).finalStatus).toBe(302);
  });
});
