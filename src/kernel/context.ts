import type { Logger } from './logger.js';
import type { RbacPermissions } from './permissions.js';

/**
 * Who is acting. Users act within their tenant with the permissions of their roles; the system actor is
 * the CLI and the worker acting as the operator of the appliance (audited as `system:<name>`).
 */
export interface UserActor {
  kind: 'user';
  userId: string;
  tenantId: string;
  /** Role names: from the token (fixed at sign-in), or from the database for API-key and demo access. */
  roles: string[];
  /** Union of those roles' permission documents. */
  permissions: RbacPermissions;
  /**
   * How the caller proved who they are; `agent`: the user's agent runtime acting for them; `pat`: a
   * personal access token (its scopes below, its permissions already narrowed to them); `codehost`: a
   * comment or label on a git host the person's host account made.
   */
  via: 'token' | 'api-key' | 'demo' | 'gateway' | 'agent' | 'pat' | 'codehost';
  /** A personal access token's scopes and id (via `pat` only). */
  token?: { id: string; scopes: ReadonlyArray<'read' | 'sessions' | 'memories' | 'admin'> };
  /** The user's profile as loaded while authenticating (saves /auth/me a second query). */
  profile?: { handle: string; email: string; displayName: string };
}

/** A caller who has not authenticated (sign-in, token refresh): may do nothing that needs a permission. */
export type Actor = UserActor | { kind: 'system'; name: string } | { kind: 'anonymous' };

/** Passed first to every service method: `service.method(ctx, input)`. */
export interface Ctx {
  /** The tenant acted on; null for system-wide operations (e.g. listing tenants). */
  tenantId: string | null;
  actor: Actor;
  requestId: string;
  log: Logger;
  /** Where the action came from: web (the API), cli, worker, or a chat channel. */
  channel: string;
}

/** Audit form of an actor: `user:<uuid>`, `system:<name>` or `anonymous`. */
export function actorString(actor: Actor): string {
  return actor.kind === 'user' ? `user:${actor.userId}` : actor.kind === 'system' ? `system:${actor.name}` : 'anonymous';
}

export function systemCtx(log: Logger, options: { name?: string; tenantId?: string | null; requestId?: string; channel?: string } = {}): Ctx {
  return {
    tenantId: options.tenantId ?? null,
    actor: { kind: 'system', name: options.name ?? 'cli' },
    requestId: options.requestId ?? crypto.randomUUID(),
    log,
    channel: options.channel ?? 'cli',
  };
}
