/** Cookie names (documented in docs/admin/identity.md, "Sign-in"). */
export const ACCESS_COOKIE = 'agentws_access';
export const REFRESH_COOKIE = 'agentws_refresh';

/**
 * Reads one cookie from a Cookie header without a dependency: names here are fixed and ASCII. Never
 * throws: a value that is not valid percent-encoding is returned as sent, so it reaches token
 * verification and fails there (401), as any other unreadable credential does, rather than counting as
 * no cookie at all (which demo mode would take as the operator).
 */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      const value = part.slice(eq + 1).trim();
      if (!value.includes('%')) return value;
      try {
        return decodeURIComponent(value);
      } catch {
        return value;
      }
    }
  }
  return undefined;
}

export function serializeCookie(name: string, value: string, o: { maxAgeS: number; path: string; secure: boolean; sameSite: 'Lax' | 'Strict' }): string {
  return [`${name}=${encodeURIComponent(value)}`, `Max-Age=${o.maxAgeS}`, `Path=${o.path}`, 'HttpOnly', `SameSite=${o.sameSite}`, ...(o.secure ? ['Secure'] : [])].join('; ');
}
