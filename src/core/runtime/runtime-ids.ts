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

/** Our providers' ids in the runtime's configuration: namespaced by tenant so tenants never collide. */
export const runtimeProviderId = (tenantId: string, name: string) => `aws_${tenantId.replaceAll('-', '')}_${name}`;

/**
 * The tenant's provider name in one of our runtime provider ids (the transcript's assistant messages name
 * the model they ran on by it); null for an id that is not this tenant's.
 */
function providerNameOf(tenantId: string, providerID: string): string | null {
  const prefix = runtimeProviderId(tenantId, '');
  return providerID.startsWith(prefix) && providerID.length > prefix.length ? providerID.slice(prefix.length) : null;
}

/** An answer's model as the tenant names it ("<provider>/<model id>"), from the runtime's ids; null if not ours. */
export function modelRefOf(tenantId: string, info: { providerID?: unknown; modelID?: unknown }): string | null {
  const provider = typeof info.providerID === 'string' ? providerNameOf(tenantId, info.providerID) : null;
  return provider && typeof info.modelID === 'string' ? `${provider}/${info.modelID}` : null;
}
