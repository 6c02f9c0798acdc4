import { createHmac } from 'node:crypto';
import { SignJWT, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { createTokenService, InvalidTokenError } from '../../src/core/auth/tokens.js';

const secret = 's'.repeat(43);
const issuer = 'https://agents.example.com';
let now = new Date('2026-06-01T12:00:00Z');
const clock = { now: () => now };

describe('token service', () => {
  const tokens = createTokenService({ secret, issuer, clock });

  it('issues tokens jose verifies, and verifies its own with every claim', async () => {
    const { token, expiresAt } = await tokens.issue({ userId: 'u1', tenantId: 't1', roles: ['member'], typ: 'access' });
    expect(expiresAt.toISOString()).toBe('2026-06-01T12:15:00.000Z');
    const { payload, protectedHeader } = await jwtVerify(token, new TextEncoder().encode(secret), { issuer, audience: 'agentws', currentDate: now });
    expect(protectedHeader.alg).toBe('HS256');
    expect(payload).toMatchObject({ sub: 'u1', tid: 't1', roles: ['member'], typ: 'access' });
    expect(await tokens.verify(token)).toMatchObject({ sub: 'u1', tid: 't1', roles: ['member'], typ: 'access' });
  });

  it('refuses expiry (also once cached), other algorithms, crit headers and the wrong type', async () => {
    const { token } = await tokens.issue({ userId: 'u1', tenantId: 't1', roles: [], typ: 'access', ttlS: 60 });
    await tokens.verify(token);
    now = new Date(now.getTime() + 61_000);
    await expect(tokens.verify(token)).rejects.toThrow(/expired/);
    now = new Date('2026-06-01T12:00:00Z');

    const key = new TextEncoder().encode(secret);
    const iat = Math.floor(now.getTime() / 1000);
    const sign = (alg: string, header: Record<string, unknown> = {}) =>
      new SignJWT({ tid: 't', roles: [], typ: 'access' }).setProtectedHeader({ alg, ...header }).setSubject('u').setIssuer(issuer).setAudience('agentws').setIssuedAt(iat).setExpirationTime(iat + 600).sign(key);
    await expect(tokens.verify(await sign('HS512'))).rejects.toThrow(InvalidTokenError);
    // jose will not sign a crit header it does not know; sign one by hand.
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const body = `${b64({ alg: 'HS256', crit: ['x-custom'], 'x-custom': 1 })}.${b64({ sub: 'u', tid: 't', roles: [], typ: 'access', iss: issuer, aud: 'agentws', iat, exp: iat + 600 })}`;
    const crit = `${body}.${createHmac('sha256', key).update(body).digest('base64url')}`;
    await expect(tokens.verify(crit)).rejects.toThrow(/critical/);
    expect((await tokens.verify(await sign('HS256'))).sub).toBe('u');
    const { token: refresh } = await tokens.issue({ userId: 'u1', tenantId: 't1', roles: [], typ: 'refresh' });
    await expect(tokens.verify(refresh)).rejects.toThrow(/refresh token is not accepted/);
    expect((await tokens.verify(refresh, ['refresh'])).typ).toBe('refresh');
    // Once cached, the type check still applies.
    await expect(tokens.verify(refresh, ['access'])).rejects.toThrow(/not accepted/);
  });

  it('a token from another issuer or secret never verifies', async () => {
    const other = createTokenService({ secret: 'o'.repeat(43), issuer, clock });
    const { token } = await other.issue({ userId: 'u', tenantId: 't', roles: ['owner'], typ: 'access' });
    await expect(tokens.verify(token)).rejects.toThrow(/signature/);
    const elsewhere = createTokenService({ secret, issuer: 'https://evil.example', clock });
    await expect(tokens.verify((await elsewhere.issue({ userId: 'u', tenantId: 't', roles: [], typ: 'access' })).token)).rejects.toThrow(/issuer/);
  });
});
