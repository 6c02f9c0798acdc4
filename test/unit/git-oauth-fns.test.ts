import { createVerify, generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { accountOf, authorizeUrl, basicAuthorization, githubApiUrl, githubAppJwt, needsRefresh, oauthPreset, parseTokenResponse, pkcePair } from '../../src/core/connectors/git-oauth-fns.js';
import { createHash } from 'node:crypto';

const NOW = new Date('2026-11-27T08:00:00Z');

describe('git OAuth rules', () => {
  it('knows the endpoints of GitHub (and Enterprise Server), GitLab and Gitea from their base URL', () => {
    expect(oauthPreset('github', 'https://github.com')).toEqual({ authorizeUrl: 'https://github.com/login/oauth/authorize', tokenUrl: 'https://github.com/login/oauth/access_token', userUrl: 'https://api.github.com/user', scopes: 'repo' });
    expect(oauthPreset('github', 'https://ghe.example.com/').userUrl).toBe('https://ghe.example.com/api/v3/user');
    expect(oauthPreset('gitlab', 'https://gitlab.example.com')).toMatchObject({ authorizeUrl: 'https://gitlab.example.com/oauth/authorize', tokenUrl: 'https://gitlab.example.com/oauth/token', userUrl: 'https://gitlab.example.com/api/v4/user' });
    expect(oauthPreset('gitea', 'https://git.example.com').tokenUrl).toBe('https://git.example.com/login/oauth/access_token');
    expect(githubApiUrl('https://github.com')).toBe('https://api.github.com');
  });

  it('sends the person with a PKCE S256 challenge of a fresh verifier', () => {
    const a = pkcePair();
    const b = pkcePair();
    expect(a.verifier).not.toBe(b.verifier);
    expect(a.verifier.length).toBeGreaterThanOrEqual(43);
    expect(createHash('sha256').update(a.verifier).digest('base64url')).toBe(a.challenge);
    const u = new URL(authorizeUrl({ clientId: 'cid', authorizeUrl: 'https://h.example/auth?x=1', tokenUrl: '', userUrl: '', scopes: 'repo' }, { redirectUri: 'https://aws.example/v1/connections/git/callback', state: 's1', challenge: a.challenge }));
    expect(Object.fromEntries(u.searchParams)).toEqual({ x: '1', response_type: 'code', client_id: 'cid', redirect_uri: 'https://aws.example/v1/connections/git/callback', scope: 'repo', state: 's1', code_challenge: a.challenge, code_challenge_method: 'S256' });
  });

  it('reads token answers as JSON or form, with expiry; says the host\'s error without the token', () => {
    expect(parseTokenResponse(200, 'application/json', JSON.stringify({ access_token: 'a', token_type: 'bearer', refresh_token: 'r', expires_in: 28800, scope: 'repo' }), NOW)).toEqual({ accessToken: 'a', refreshToken: 'r', expiresAt: new Date(NOW.getTime() + 28_800_000), scopes: 'repo' });
    expect(parseTokenResponse(200, 'application/x-www-form-urlencoded', 'access_token=a&token_type=bearer&scope=repo', NOW)).toEqual({ accessToken: 'a', refreshToken: null, expiresAt: null, scopes: 'repo' });
    // GitHub says errors with a 200.
    expect(() => parseTokenResponse(200, 'application/json', JSON.stringify({ error: 'bad_verification_code', error_description: 'The code passed is incorrect or expired.' }), NOW)).toThrow('the host refused (bad_verification_code: The code passed is incorrect or expired.)');
    expect(() => parseTokenResponse(500, 'text/html', '<html>', NOW)).toThrow('HTTP 500');
    expect(() => parseTokenResponse(200, 'application/json', JSON.stringify({ access_token: 'secret-x', token_type: 'mac' }), NOW)).toThrow(/type mac/);
    expect(() => parseTokenResponse(200, 'application/json', '{', NOW)).toThrow(/does not parse/);
  });

  it('refreshes five minutes before expiry, never a token that does not expire', () => {
    expect(needsRefresh(null, NOW)).toBe(false);
    expect(needsRefresh(new Date(NOW.getTime() + 6 * 60_000), NOW)).toBe(false);
    expect(needsRefresh(new Date(NOW.getTime() + 4 * 60_000), NOW)).toBe(true);
    expect(needsRefresh(new Date(NOW.getTime() - 1), NOW)).toBe(true);
  });

  it('names the account from GitHub/Gitea (login) or GitLab (username)', () => {
    expect(accountOf({ login: 'mia', id: 1 })).toBe('mia');
    expect(accountOf({ username: 'mia-gl' })).toBe('mia-gl');
    expect(accountOf(null)).toBe('');
    expect(accountOf({ login: 7 })).toBe('');
  });

  it("signs a GitHub App's JWT (RS256) that GitHub's checks accept: issued in the past, at most ten minutes", () => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const jwt = githubAppJwt('4242', privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(), NOW);
    const [h, p, s] = jwt.split('.');
    expect(JSON.parse(Buffer.from(h!, 'base64url').toString())).toEqual({ alg: 'RS256', typ: 'JWT' });
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString());
    expect(claims.iss).toBe('4242');
    expect(claims.iat).toBeLessThan(NOW.getTime() / 1000);
    expect(claims.exp - claims.iat).toBeLessThanOrEqual(600);
    expect(claims.exp).toBeGreaterThan(NOW.getTime() / 1000);
    expect(createVerify('RSA-SHA256').update(`${h}.${p}`).verify(publicKey, Buffer.from(s!, 'base64url'))).toBe(true);
  });

  it('sends tokens to git hosts as Basic credentials', () => {
    expect(basicAuthorization('oauth2', 't0k')).toBe(`Basic ${Buffer.from('oauth2:t0k').toString('base64')}`);
  });
});
