import type { Logger } from './logger.js';

/**
 * Who is acting. Users act within their tenant with the permissions of their roles; the system actor is
 * the CLI and the worker acting as the operator of the appliance (audited as `system:<name>`).
 */
export type Actor =
  | { kind: 'user'; userId: string; tenantId: string; roles: string[] }
  | { kind: 'system'; name: string };

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

/** Audit form of an actor: `user:<uuid>` or `system:<name>`. */
export function actorString(actor: Actor): string {
  return actor.kind === 'user' ? `user:${actor.userId}` : `system:${actor.name}`;
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
