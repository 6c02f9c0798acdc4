import { createHmac } from 'node:crypto';
import { SignJWT, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { createTokenService, InvalidTokenError } from '../../src/core/auth/tokens.js';

const secret = 's'.repeat(43);
const issuer = 'https://agents.example.com';
let now = new Date('2026-06-01T12:00:00Z');
const clock = { now: () => now };

const signIn = { sid: '0b9d2c4e-5f61-4a7b-8c9d-0e1f2a3b4c5d', authTime: Math.floor(now.getTime() / 1000) };

describe('token service', () => {
  const tokens = createTokenService({ secret, issuer, clock });

  it('accepts only the canonical spelling of a signature (no appended junk, no same-bytes last character)', async () => {
    const { token } = await tokens.issue({ userId: 'u1', tenantId: 't1', roles: ['owner'], typ: 'access', ...signIn });
    const [h, p, sig] = token.split('.');
    // 43 base64url characters carry 258 bits for 256: the last one has 4 spellings of the same bytes.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = alphabet.indexOf(sig.at(-1)!);
    const sameBytes = [0, 1, 2, 3].map((i) => alphabet[(last & ~3) | i]).filter((c) => c !== sig.at(-1));
    const variants = [`${sig}!!`, `${sig}=`, `${sig}.`, ` ${sig}`, ...sameBytes.map((c) => sig.slice(0, -1) + c)];
    for (const s of variants) {
      expect(Buffer.from(s, 'base64url').equals(Buffer.from(sig, 'base64url')), s).toBe(true);
      await expect(tokens.verify(`${h}.${p}.${s}`), s).rejects.toThrow(InvalidTokenError);
    }
    expect((await tokens.verify(token)).sub).toBe('u1');
  });

  it('caps every token of a sign-in at its end, and reads auth_time (iat for older tokens)', async () => {
    const notAfterS = signIn.authTime + 100;
    const { token, expiresAt } = await tokens.issue({ userId: 'u1', tenantId: 't1', roles: [], typ: 'access', ...signIn, notAfterS });
    expect(expiresAt.getTime() / 1000).toBe(notAfterS);
    expect((await tokens.verify(token)).exp).toBe(notAfterS);
    const key = new TextEncoder().encode(secret);
    const iat = Math.floor(now.getTime() / 1000) - 50;
    const legacy = await new SignJWT({ tid: 't', roles: [], typ: 'access' }).setProtectedHeader({ alg: 'HS256' }).setSubject('u').setIssuer(issuer).setAudience('agentws').setIssuedAt(iat).setExpirationTime(iat + 600).sign(key);
    expect(await tokens.verify(legacy)).toMatchObject({ authTime: iat });
    expect((await tokens.verify(legacy)).sid).toBeUndefined();
    const badSid = await new SignJWT({ tid: 't', roles: [], typ: 'access', sid: 'x' }).setProtectedHeader({ alg: 'HS256' }).setSubject('u').setIssuer(issuer).setAudience('agentws').setIssuedAt(iat).setExpirationTime(iat + 600).sign(key);
    await expect(tokens.verify(badSid)).rejects.toThrow(/sign-in id/);
  });

  it('issues tokens jose verifies, and verifies its own with every claim', async () => {
    const { token, expiresAt } = await tokens.issue({ userId: 'u1', tenantId: 't1', roles: ['member'], typ: 'access', ...signIn });
    expect(expiresAt.toISOString()).toBe('2026-06-01T12:15:00.000Z');
    const { payload, protectedHeader } = await jwtVerify(token, new TextEncoder().encode(secret), { issuer, audience: 'agentws', currentDate: now });
    expect(protectedHeader.alg).toBe('HS256');
    expect(payload).toMatchObject({ sub: 'u1', tid: 't1', roles: ['member'], typ: 'access', sid: signIn.sid, auth_time: signIn.authTime });
    expect(await tokens.verify(token)).toMatchObject({ sub: 'u1', tid: 't1', roles: ['member'], typ: 'access', sid: signIn.sid, authTime: signIn.authTime });
  });

  it('refuses expiry (also once cached), other algorithms, crit headers and the wrong type', async () => {
    const { token } = await tokens.issue({ userId: 'u1', tenantId: 't1', roles: [], typ: 'access', ttlS: 60, ...signIn });
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
    const { token: refresh } = await tokens.issue({ userId: 'u1', tenantId: 't1', roles: [], typ: 'refresh', ...signIn });
    await expect(tokens.verify(refresh)).rejects.toThrow(/refresh token is not accepted/);
    expect((await tokens.verify(refresh, ['refresh'])).typ).toBe('refresh');
    // Once cached, the type check still applies.
    await expect(tokens.verify(refresh, ['access'])).rejects.toThrow(/not accepted/);
  });

  it('a token from another issuer or secret never verifies', async () => {
    const other = createTokenService({ secret: 'o'.repeat(43), issuer, clock });
    const { token } = await other.issue({ userId: 'u', tenantId: 't', roles: ['owner'], typ: 'access', ...signIn });
    await expect(tokens.verify(token)).rejects.toThrow(/signature/);
    const elsewhere = createTokenService({ secret, issuer: 'https://evil.example', clock });
    await expect(tokens.verify((await elsewhere.issue({ userId: 'u', tenantId: 't', roles: [], typ: 'access', ...signIn })).token)).rejects.toThrow(/issuer/);
  });
});
