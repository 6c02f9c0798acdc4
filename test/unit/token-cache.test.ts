import { describe, expect, it } from 'vitest';
import { createTokenService } from '../../src/core/auth/tokens.js';

const issuer = 'https://agents.example.com';
const signIn = { sid: '0b9d2c4e-5f61-4a7b-8c9d-0e1f2a3b4c5d', authTime: Date.parse('2026-06-01T12:00:00Z') / 1000 };

/** The verified-token cache behind the synchronous authentication path (tokens.cached). */
describe('verified-token cache', () => {
  let now = new Date('2026-06-01T12:00:00Z');
  const tokens = createTokenService({ secret: 'c'.repeat(43), issuer, clock: { now: () => now } });

  it('knows a token only once verify() accepted it, and only until it expires', async () => {
    const { token } = await tokens.issue({ userId: 'u1', tenantId: 't1', roles: ['member'], typ: 'access', ttlS: 60, ...signIn });
    expect(tokens.cached(token)).toBeUndefined();
    await tokens.verify(token);
    expect(tokens.cached(token)).toMatchObject({ sub: 'u1', tid: 't1', roles: ['member'], typ: 'access', ...signIn });
    // A copy of the same bytes (as each request's header is) hits too.
    expect(tokens.cached(Buffer.from(`Bearer ${token}`).toString('latin1').slice(7))?.sub).toBe('u1');
    expect(tokens.cached(token, ['refresh'])).toBeUndefined();
    now = new Date(now.getTime() + 61_000);
    expect(tokens.cached(token)).toBeUndefined();
    await expect(tokens.verify(token)).rejects.toThrow(/expired/);
  });

  it('is found by the end of the signature but answers only the byte-identical token', async () => {
    now = new Date('2026-06-01T12:00:00Z');
    const { token } = await tokens.issue({ userId: 'u1', tenantId: 't1', roles: ['member'], typ: 'access', ...signIn });
    await tokens.verify(token);
    const [header, payload, signature] = token.split('.');
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const forged = `${header}.${Buffer.from(JSON.stringify({ ...claims, roles: ['owner'] })).toString('base64url')}.${signature}`;
    expect(tokens.cached(forged)).toBeUndefined();
    await expect(tokens.verify(forged)).rejects.toThrow(/signature/);
    // The forgery displaced nothing: the real token still hits.
    expect(tokens.cached(token)?.roles).toEqual(['member']);
    for (const junk of ['', 'no-dots', '..', `${header}.${payload}.`, signature.slice(-6)]) expect(tokens.cached(junk)).toBeUndefined();
  });
});
