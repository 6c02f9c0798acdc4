import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Seals secrets at rest (provider API keys, bot tokens, the managed runtime's password) with AES-256-GCM.
 * The sealed form is `v1.<key id>.<iv>.<tag>.<ciphertext>` (base64url parts). The key id is a short hash
 * of the key, so a value sealed under an older key is recognised as such instead of failing as garbage,
 * and several keys can be held during a rotation.
 */
export interface SecretBox {
  readonly keyId: string;
  seal(plaintext: string): string;
  open(sealed: string): string;
}

class SecretBoxError extends Error {}

export function keyIdOf(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

/** `keys`: base64url 32-byte keys, the first one seals; all of them open. */
export function createSecretBox(keys: string[]): SecretBox {
  const ring = keys.map((k) => Buffer.from(k, 'base64url'));
  if (ring.length === 0 || ring.some((k) => k.length !== 32)) throw new SecretBoxError('encryption keys must be 32 bytes, base64url-encoded');
  const byId = new Map(ring.map((k) => [keyIdOf(k), k]));
  const current = ring[0];
  const currentId = keyIdOf(current);
  return {
    keyId: currentId,
    seal(plaintext) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', current, iv);
      const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return ['v1', currentId, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
    },
    open(sealed) {
      const [v, kid, iv, tag, ct] = sealed.split('.');
      if (v !== 'v1' || !kid || iv === undefined || tag === undefined || ct === undefined) throw new SecretBoxError('not a sealed secret');
      const key = byId.get(kid);
      if (!key) throw new SecretBoxError(`secret was sealed with encryption key ${kid}, which is not configured (current key: ${currentId})`);
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      try {
        return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
      } catch {
        throw new SecretBoxError('sealed secret failed authentication (tampered, or sealed with another key)');
      }
    },
  };
}
