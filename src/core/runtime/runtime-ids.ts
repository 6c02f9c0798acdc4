import { randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
let lastMs = 0;
let counter = 0;

/**
 * An id in the runtime's own ascending format (`msg_` + 12 hex digits of time*4096+counter, low 48 bits,
 * + 14 random base62 characters). opencode orders a session's messages by id, so a message id we
 * choose ourselves (to make a retried turn recognisable) must sort like the ones it generates.
 */
export function ascendingId(prefix: 'msg' | 'prt' | 'evt'): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    counter = 0;
  }
  counter++;
  const stamp = ((BigInt(now) * 0x1000n + BigInt(counter)) & 0xffffffffffffn).toString(16).padStart(12, '0');
  const bytes = randomBytes(14);
  let rand = '';
  for (const b of bytes) rand += BASE62[b % 62];
  return `${prefix}_${stamp}${rand}`;
}
