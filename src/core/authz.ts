import { ForbiddenError } from './errors.js';
import type { Ctx } from './context.js';

/** For operations only the appliance's operator may run (CLI, worker): cross-tenant administration. */
export function requireSystem(ctx: Ctx, what: string): void {
  if (ctx.actor.kind !== 'system') {
    throw new ForbiddenError(`${what} is only available to the operator (CLI)`);
  }
}
