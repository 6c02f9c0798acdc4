import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import type { Clock } from '../../lib/clock.js';

/**
 * Our JWTs: HS256, signed with AGENTWS_JWT_SECRET. Claims:
 *   iss  the service's public URL        aud  "agentws"
 *   sub  user id                         tid  tenant id (ours, not the identity provider's)
 *   roles  role names at sign-in         typ  "access" | "refresh"
 *   iat, exp, jti
 * Roles are fixed at sign-in: refresh keeps them (SPEC.md auth rule 1), so role changes take effect at
 * the next full sign-in.
 */
export const ACCESS_TTL_S = 15 * 60;
export const REFRESH_TTL_S = 7 * 24 * 60 * 60;
/** Lifetime of a token issued by POST /v1/auth/refresh (SPEC.md: 900 seconds). */
export const REFRESHED_TTL_S = 900;
export const AUDIENCE = 'agentws';

export type TokenType = 'access' | 'refresh';

export interface TokenClaims {
  sub: string;
  tid: string;
  roles: string[];
  typ: TokenType;
  exp: number;
  iat: number;
  jti: string;
}

export class InvalidTokenError extends Error {}

export function createTokenService(deps: { secret: string; issuer: string; clock: Clock }) {
  const key = new TextEncoder().encode(deps.secret);
  const nowS = () => Math.floor(deps.clock.now().getTime() / 1000);

  return {
    /** Signs a token for a user; ttlS defaults by type (access 15 min, refresh 7 days). */
    async issue(input: { userId: string; tenantId: string; roles: string[]; typ: TokenType; ttlS?: number }): Promise<{ token: string; expiresAt: Date }> {
      const iat = nowS();
      const exp = iat + (input.ttlS ?? (input.typ === 'access' ? ACCESS_TTL_S : REFRESH_TTL_S));
      const token = await new SignJWT({ tid: input.tenantId, roles: input.roles, typ: input.typ })
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
     * Verifies signature (HS256 only: `none` and every other algorithm are refused), issuer, audience,
     * expiry and claim shapes. `types` limits which token types are accepted.
     */
    async verify(token: string, types: TokenType[] = ['access']): Promise<TokenClaims> {
      try {
        const { payload } = await jwtVerify(token, key, {
          algorithms: ['HS256'],
          issuer: deps.issuer,
          audience: AUDIENCE,
          currentDate: deps.clock.now(),
          requiredClaims: ['sub', 'exp', 'iat'],
        });
        const { sub, tid, roles, typ, exp, iat, jti } = payload as Record<string, unknown>;
        if (typeof sub !== 'string' || typeof tid !== 'string' || !Array.isArray(roles) || !roles.every((r) => typeof r === 'string')) {
          throw new InvalidTokenError('token claims are malformed');
        }
        if (typ !== 'access' && typ !== 'refresh') throw new InvalidTokenError('token type is unknown');
        if (!types.includes(typ)) throw new InvalidTokenError(`a ${typ} token is not accepted here`);
        return { sub, tid, roles: roles as string[], typ, exp: exp as number, iat: iat as number, jti: String(jti ?? '') };
      } catch (err) {
        if (err instanceof InvalidTokenError) throw err;
        if (err instanceof joseErrors.JOSEError) throw new InvalidTokenError(err.code);
        throw new InvalidTokenError('token is not a JWT');
      }
    },
  };
}

export type TokenService = ReturnType<typeof createTokenService>;
