import { createHmac, createSecretKey, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../../lib/clock.js';

/**
 * Our JWTs: HS256, signed with AGENTWS_JWT_SECRET. Claims:
 *   iss  the service's public URL        aud  "agentws"
 *   sub  user id                         tid  tenant id (ours, not the identity provider's)
 *   roles  role names at sign-in         typ  "access" | "refresh"
 *   sid  the sign-in the token belongs to (auth_sign_ins; revocable)
 *   auth_time  when that sign-in happened (epoch seconds): refreshes never reach beyond 7 days of it
 *   iat, exp, jti
 * Roles are fixed at sign-in: refresh keeps them (SPEC.md auth rule 1), so role changes take effect at
 * the next full sign-in.
 */
export const ACCESS_TTL_S = 15 * 60;
export const REFRESH_TTL_S = 7 * 24 * 60 * 60;
/** Lifetime of a token issued by POST /v1/auth/refresh (SPEC.md: 900 seconds). */
export const REFRESHED_TTL_S = 900;
const AUDIENCE = 'agentws';

export type TokenType = 'access' | 'refresh';

export interface TokenClaims {
  sub: string;
  tid: string;
  roles: string[];
  typ: TokenType;
  exp: number;
  iat: number;
  jti: string;
  /** The sign-in (auth_sign_ins.id); absent only on tokens made before sign-ins were recorded. */
  sid?: string;
  /** Epoch seconds of that sign-in; tokens without the claim count from their own `iat`. */
  authTime: number;
}

export class InvalidTokenError extends Error {}

/** An HMAC-SHA256 signature in base64url: 32 bytes are exactly 43 characters, without padding. */
const SIGNATURE = /^[A-Za-z0-9_-]{43}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Six characters of the signature (base64url of an HMAC: as good as random) folded into a number. */
function keyOf(token: string): number {
  let key = 0;
  for (let i = Math.max(0, token.length - 6); i < token.length; i++) key = (key * 64 + token.charCodeAt(i)) | 0;
  return key;
}

/** Verified tokens remembered per process: clients send the same token on every request. */
const VERIFIED_CACHE_MAX = 10_000;

export function createTokenService(deps: { secret: string; issuer: string; clock: Clock }) {
  const key = new TextEncoder().encode(deps.secret);
  const hmacKey = createSecretKey(key);
  const nowS = () => Math.floor(deps.clock.now().getTime() / 1000);
  // Only a byte-identical, already verified token ever hits (see remembered()); expiry is still
  // checked on every use.
  const verified = new Map<number, { token: string; claims: TokenClaims }>();

  return {
    /** Signs a token for a user; ttlS defaults by type (access 15 min, refresh 7 days). */
    async issue(input: { userId: string; tenantId: string; roles: string[]; typ: TokenType; sid: string; authTime: number; ttlS?: number; notAfterS?: number }): Promise<{ token: string; expiresAt: Date }> {
      const iat = nowS();
      // Nothing of a sign-in outlives it: `notAfterS` caps every token issued for it.
      const exp = Math.min(iat + (input.ttlS ?? (input.typ === 'access' ? ACCESS_TTL_S : REFRESH_TTL_S)), input.notAfterS ?? Number.MAX_SAFE_INTEGER);
      // jose is loaded at the first sign-in, not by every command that builds the core.
      const { SignJWT } = await import('jose');
      const token = await new SignJWT({ tid: input.tenantId, roles: input.roles, typ: input.typ, sid: input.sid, auth_time: input.authTime })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setSubject(input.userId)
        .setIssuer(deps.issuer)
        .setAudience(AUDIENCE)
        .setIssuedAt(iat)
        .setExpirationTime(exp)
        .setJti(crypto.randomUUID())
        .sign(key);
      return { token, expiresAt: new Date(exp * 1000) };
    },

    /**
     * The claims of a token this process has verified and that is still valid for these types, without
     * any work beyond a lookup; undefined otherwise (verify() then decides, and says why).
     */
    cached(token: string, types: TokenType[] = ['access'], nowMs = deps.clock.now().getTime()): TokenClaims | undefined {
      const known = remembered(token);
      return known && known.exp > Math.floor(nowMs / 1000) && types.includes(known.typ) ? known : undefined;
    },

    /**
     * Verifies a compact JWS: header alg exactly HS256 (`none` and every other algorithm are refused),
     * the HMAC-SHA256 signature (constant-time), then issuer, audience, expiry and claim shapes. `types`
     * limits which token types are accepted.
     *
     * Verification is on every authenticated request. jose's verify goes through WebCrypto and costs
     * about 110 µs a token on Node 20 against 12 µs for node:crypto's HMAC, a ninth of the request
     * budget, so it is done here; tokens are still signed with jose, and the tests check both agree.
     */
    async verify(token: string, types: TokenType[] = ['access']): Promise<TokenClaims> {
      const known = remembered(token);
      if (known) {
        if (known.exp <= nowS()) {
          verified.delete(keyOf(token));
          throw new InvalidTokenError('token has expired');
        }
        if (!types.includes(known.typ)) throw new InvalidTokenError(`a ${known.typ} token is not accepted here`);
        return known;
      }
      const claims = verifyUncached(token);
      if (verified.size >= VERIFIED_CACHE_MAX) verified.clear();
      verified.set(keyOf(token), { token, claims });
      if (!types.includes(claims.typ)) throw new InvalidTokenError(`a ${claims.typ} token is not accepted here`);
      return claims;
    },
  };

  /**
   * A verified token's claims, found by a number read from the end of its signature and then compared
   * whole, so only a byte-identical token hits. Hashing the token itself (~300 characters, a new string
   * on every request) was most of what a lookup cost. Two remembered tokens with the same number only
   * take turns in the cache.
   */
  function remembered(token: string): TokenClaims | undefined {
    const hit = typeof token === 'string' ? verified.get(keyOf(token)) : undefined;
    return hit !== undefined && hit.token === token ? hit.claims : undefined;
  }

  function verifyUncached(token: string): TokenClaims {
    const parts = typeof token === 'string' ? token.split('.') : [];
    if (parts.length !== 3 || !parts[0] || !parts[1] || !parts[2]) throw new InvalidTokenError('token is not a JWT');
    const header = decodeJson(parts[0]);
    if (header?.alg !== 'HS256') throw new InvalidTokenError('token algorithm is not HS256');
    if ('crit' in header) throw new InvalidTokenError('token has critical header parameters');
    // Only the one canonical base64url spelling of the signature: Node's decoder skips characters outside
    // the alphabet and ignores the unused low bits of the last character, so `<sig>!!` or a last
    // character swapped for a neighbour would otherwise decode to the same bytes and pass.
    if (!SIGNATURE.test(parts[2])) throw new InvalidTokenError('token signature is not canonical base64url');
    const expected = createHmac('sha256', hmacKey).update(`${parts[0]}.${parts[1]}`).digest();
    const given = Buffer.from(parts[2], 'base64url');
    if (given.toString('base64url') !== parts[2]) throw new InvalidTokenError('token signature is not canonical base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new InvalidTokenError('token signature is invalid');
    const payload = decodeJson(parts[1]);
    if (!payload) throw new InvalidTokenError('token claims are malformed');
    const { sub, tid, roles, typ, exp, iat, jti, iss, aud, sid, auth_time: authTime } = payload;
    if (iss !== deps.issuer) throw new InvalidTokenError('token issuer is wrong');
    if (!(aud === AUDIENCE || (Array.isArray(aud) && aud.includes(AUDIENCE)))) throw new InvalidTokenError('token audience is wrong');
    if (typeof exp !== 'number' || typeof iat !== 'number') throw new InvalidTokenError('token lacks exp or iat');
    if (exp <= nowS()) throw new InvalidTokenError('token has expired');
    if (typeof payload.nbf === 'number' && payload.nbf > nowS()) throw new InvalidTokenError('token is not yet valid');
    if (typeof sub !== 'string' || typeof tid !== 'string' || !Array.isArray(roles) || !roles.every((r) => typeof r === 'string')) {
      throw new InvalidTokenError('token claims are malformed');
    }
    if (typ !== 'access' && typ !== 'refresh') throw new InvalidTokenError('token type is unknown');
    if (sid !== undefined && (typeof sid !== 'string' || !UUID.test(sid))) throw new InvalidTokenError('token sign-in id is malformed');
    if (authTime !== undefined && typeof authTime !== 'number') throw new InvalidTokenError('token auth_time is malformed');
    return Object.freeze({
      sub,
      tid,
      roles: Object.freeze([...(roles as string[])]) as string[],
      typ,
      exp,
      iat,
      jti: String(jti ?? ''),
      ...(sid ? { sid } : {}),
      authTime: (authTime as number | undefined) ?? iat,
    });
  }
}

export type TokenService = ReturnType<typeof createTokenService>;

function decodeJson(part: string): Record<string, unknown> | null {
  try {
    const value = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return value && typeof value === 'object' && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}
