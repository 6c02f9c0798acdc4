import type { Tx } from '../../db/database.js';
import type { Ctx } from '../../kernel/context.js';
import type { Logger } from '../../kernel/logger.js';
import type { RuntimeOwner } from '../runtime/host/runtime-host.js';
import type { SessionStreams } from './session-stream.js';
import type { SessionsRepo } from './sessions.repo.js';
import type { TurnsRepo } from './turns.repo.js';
import type { TurnEvents } from './turn-events.js';
import { OWNER_INACTIVE } from './turn-runner.js';

/** The error of a plan cancelled because its person was deactivated. */
export const PLAN_OWNER_INACTIVE = 'cancelled: the person this plan belongs to was deactivated';

/**
 * What a person's deactivation (SCIM `active: false`) or removal does to their agent: nothing
 * of it goes on working in their name. In the deactivating transaction their queued turns fail (so a turn
 * queued a moment before never runs, even if they are reactivated later); once it commits, their plans
 * are cancelled (their running subtasks aborted), their runtime is stopped wherever it runs (here, on
 * another serve of the host, on a runner), which ends a turn in flight, and every process forgets it knew
 * them active. Until the runtime is gone, and if it cannot be stopped (a runner out of reach), the gateway
 * host refuses it (auth/active-users.ts): the model, the memory tools, git and MCP. A removal deletes the
 * turns and plans with the user row; only the runtime is left to stop.
 */
export function createPersonStop(deps: {
  sessionsRepo: Pick<SessionsRepo, 'byId'>;
  turnsRepo: Pick<TurnsRepo, 'failQueuedTurnsOfUser'>;
  streams: Pick<SessionStreams, 'publish'>;
  events: Pick<TurnEvents, 'emit'>;
  plans: { cancelAllOf(ctx: Ctx, owner: RuntimeOwner, reason: string): Promise<number> };
  /** Stops the person's runtime wherever it runs (pool.stopAnywhere): true once it no longer runs. */
  stopRuntime: (owner: RuntimeOwner) => Promise<boolean>;
  /** Drops this process's memory that the person is active (the bus tells the others). */
  forget: (userId: string) => void;
  db: Parameters<SessionsRepo['byId']>[0];
  log: Logger;
}) {
  const { log } = deps;

  async function stopRuntime(owner: RuntimeOwner): Promise<void> {
    const stopped = await deps.stopRuntime(owner).catch((err: Error) => {
      log.error({ err: err.message, userId: owner.userId }, 'could not stop the runtime of a deactivated person');
      return false;
    });
    if (!stopped) log.warn({ userId: owner.userId }, "a deactivated person's runtime still runs: the gateways refuse it, and its idle timeout will stop it");
  }

  async function afterDeactivation(ctx: Ctx, owner: RuntimeOwner, failed: Array<{ id: string; sessionId: string }>): Promise<void> {
    deps.forget(owner.userId);
    // Plans first: once a plan is cancelled, the turns its runtime loses below do not move it on.
    await deps.plans.cancelAllOf(ctx, owner, PLAN_OWNER_INACTIVE).catch((err: Error) => log.error({ err: err.message, userId: owner.userId }, 'could not cancel the plans of a deactivated person'));
    await stopRuntime(owner);
    for (const t of failed) {
      await deps.streams.publish(t.sessionId, 'session.error', { error: { name: 'TurnFailed', message: OWNER_INACTIVE } }).catch(() => {});
      const s = await deps.sessionsRepo.byId(deps.db, owner.tenantId, t.sessionId).catch(() => null);
      if (s) deps.events.emit('turn.failed', { session: s, turnId: t.id });
    }
  }

  return {
    /**
     * In the transaction that deactivates the person: their queued turns fail (how many is returned, for
     * the audit entry); the rest happens once it commits.
     */
    async deactivated(tx: Tx, ctx: Ctx, owner: RuntimeOwner): Promise<{ queuedTurns: number }> {
      const failed = await deps.turnsRepo.failQueuedTurnsOfUser(tx, owner.tenantId, owner.userId, OWNER_INACTIVE);
      tx.afterCommit(() => void afterDeactivation(ctx, owner, failed).catch((err: Error) => log.error({ err: err.message }, "could not stop a deactivated person's agent")));
      return { queuedTurns: failed.length };
    },

    /** In the transaction that removes the person (their turns and plans go with the row): their runtime stops once it commits. */
    removed(tx: Tx, owner: RuntimeOwner): void {
      tx.afterCommit(() => {
        deps.forget(owner.userId);
        void stopRuntime(owner);
      });
    },
  };
}
