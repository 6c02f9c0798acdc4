import type { Tx } from '../../db/database.js';
import { actorString, type Ctx } from '../context.js';
import type { EventBus } from '../events.js';
import type { AuditRepo } from './audit.repo.js';

export const AUDIT_CHANNEL = 'audit.appended';

export interface AuditInput {
  action: string;
  target: string;
  sessionId?: string | null;
  durationMs?: number | null;
  details?: Record<string, unknown>;
  /** Defaults to ctx.tenantId; set when the action creates the tenant it belongs to. */
  tenantId?: string | null;
}

/**
 * Writes audit entries. Callers pass the transaction of the action they record, so an entry exists if
 * and only if the action committed. Subscribers (e.g. `aws audit tail --follow`) hear of new entries
 * after commit through the event bus.
 */
export function createAuditService(deps: { repo: AuditRepo; bus: EventBus }) {
  return {
    /** Records one action in the caller's transaction. */
    async record(tx: Tx, ctx: Ctx, input: AuditInput): Promise<string> {
      const tenantId = input.tenantId === undefined ? ctx.tenantId : input.tenantId;
      const { id } = await deps.repo.insert(tx, {
        tenantId,
        userId: ctx.actor.kind === 'user' ? ctx.actor.userId : null,
        actor: actorString(ctx.actor),
        action: input.action,
        target: input.target,
        sessionId: input.sessionId,
        channel: ctx.channel,
        durationMs: input.durationMs,
        details: { requestId: ctx.requestId, ...input.details },
      });
      await deps.bus.publish(AUDIT_CHANNEL, { id, tenantId }, tx);
      return id;
    },
  };
}

export type AuditService = ReturnType<typeof createAuditService>;
