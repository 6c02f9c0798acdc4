import { randomBytes, timingSafeEqual, createHash } from 'node:crypto';

/** A random secret of `bytes` bytes, base64url-encoded (safe in env files, URLs and headers). */
export function randomSecret(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

/** Constant-time string comparison; hashing first makes the comparison length-independent too. */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/** Masks a secret for display: enough to recognise it, not enough to use it. */
export function maskSecret(value: string): string {
  if (!value) return '';
  if (value.length <= 8) return '********';
  return `${value.slice(0, 4)}…(${value.length} chars)`;
}
