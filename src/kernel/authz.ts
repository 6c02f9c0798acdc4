import type { Ctx, UserActor } from './context.js';
import { ForbiddenError, UnauthenticatedError, ValidationError } from './errors.js';
import type { RbacPermissions } from './permissions.js';

/** For operations only the appliance's operator may run (CLI, worker): cross-tenant administration. */
export function requireSystem(ctx: Ctx, what: string): void {
  if (ctx.actor.kind !== 'system') {
    throw new ForbiddenError(`${what} is only available to the operator (CLI)`);
  }
}

/**
 * For what belongs to a person (their memories, their connected accounts): a signed-in user. The
 * operator acts on tenants, not as anyone. `what` completes "… belong to users".
 */
export function requireUser(ctx: Ctx, what: string): UserActor {
  if (ctx.actor.kind === 'anonymous') throw new UnauthenticatedError();
  if (ctx.actor.kind !== 'user') throw new ForbiddenError(`${what} belong to users: this needs a signed-in user`, { hint: "Call the API with a user's token." });
  return ctx.actor;
}

/** The tenant an action applies to: the user's own, or the one the operator named (`--tenant`). */
export function tenantOf(ctx: Ctx): string {
  if (ctx.actor.kind === 'anonymous') throw new UnauthenticatedError();
  if (ctx.actor.kind === 'user') return ctx.actor.tenantId;
  if (!ctx.tenantId) throw new ValidationError('this action needs a tenant', { hint: 'Name one with --tenant <slug or id>.' });
  return ctx.tenantId;
}

/**
 * Checked at the top of every service method that needs a permission. Users need it in their effective
 * permissions; the operator (system actor) has every permission within the tenant it names.
 * Returns the tenant the action applies to.
 */
export function requirePermission(ctx: Ctx, permission: PermissionName): string {
  const tenantId = tenantOf(ctx);
  if (ctx.actor.kind === 'user' && !hasPermission(ctx.actor.permissions, permission)) {
    throw new ForbiddenError(`missing permission ${permission}`, { details: { permission } });
  }
  return tenantId;
}

export type PermissionName =
  | `admin.${keyof RbacPermissions['admin']}`
  | `memory.${keyof RbacPermissions['memory']}`
  | `agents.${Exclude<keyof RbacPermissions['agents'], 'use_templates'>}`;

export function hasPermission(p: RbacPermissions, permission: PermissionName): boolean {
  const [group, member] = permission.split('.') as [keyof RbacPermissions, string];
  return (p[group] as Record<string, unknown>)[member] === true;
}

/**
 * For changes no permission guards (a person's own sessions and plans: delete, cancel, answer a tool
 * request): a personal access token makes them only with the scope that names them. Other callers pass.
 */
export function requireTokenScope(ctx: Ctx, scope: 'sessions' | 'memories' | 'admin'): void {
  if (ctx.actor.kind === 'user' && ctx.actor.token && !ctx.actor.token.scopes.includes(scope)) {
    throw new ForbiddenError(`this token lacks the ${scope} scope`, { code: 'token_scope', details: { scope, field: 'scopes' } });
  }
}
