import type { Database } from '../../db/database.js';
import { requirePermission, requireTokenScope } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { ConflictError, NotFoundError } from '../../kernel/errors.js';
import type { AuditService } from '../audit/audit.service.js';
import type { RuntimeClient, RuntimeMessage } from '../runtime/runtime-client.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import { capDiffs, deletedBy, sessionChanges, totalsOf, turnChanges, type FileChange, type TurnFileDiff } from './change-sets.js';
import type { SessionRow, SessionsRepo } from './sessions.repo.js';

/**
 * What a session's turns changed in the workspace, and undo and redo of turns (issue 38). The runtime
 * keeps the workspace's snapshots (opencode's, a git repository in its own data directory inside the
 * sandbox, written by git run there as the agent's user): each turn's changed files are recorded on its
 * prompt when it ends, and a revert puts files back from them. The service never runs git, nor reads the
 * workspace, for any of this: it reads what the runtime reports (which the agent, owning that repository,
 * could make lie about its own workspace, and nothing more) and builds the answer from it (change-sets.ts).
 */

export interface TurnSummary {
  messageId: string;
  files: number;
  additions: number;
  deletions: number;
  /** The paths it changed (the first 20): what the chat names under the turn. */
  paths: string[];
  /** Undone (the session is reverted to this turn or an earlier one); a redo brings it back. */
  reverted: boolean;
}

export interface ChangeSet {
  sessionId: string;
  /** The turn (its prompt's message id) these are the changes of; null: the whole session. */
  messageId: string | null;
  files: FileChange[];
  totals: { files: number; additions: number; deletions: number };
  /** Every turn of the session with its counts, oldest first (the whole session's answer only). */
  turns: TurnSummary[];
  /** The turn the session is reverted to (it and every later one undone), or null. */
  reverted: { messageId: string; turns: number } | null;
  /** Whether the runtimes keep snapshots (AGENTWS_RUNTIME_SNAPSHOTS): off, nothing is listed and undo is refused. */
  snapshots: boolean;
}

const diffsOf = (m: RuntimeMessage): TurnFileDiff[] => {
  const diffs = (m.info.summary as { diffs?: unknown } | undefined)?.diffs;
  return Array.isArray(diffs) ? (diffs as TurnFileDiff[]) : [];
};

export function createSessionChanges(deps: {
  db: Database;
  repo: Pick<SessionsRepo, 'turnInFlight'>;
  audit: AuditService;
  pool: Pick<RuntimePool, 'client'>;
  /** AGENTWS_RUNTIME_SNAPSHOTS: off, the runtimes keep no snapshots, and an undo would restore nothing. */
  snapshots: boolean;
  /** The session the caller may act on, else 404 (sessions.service.ts owned). */
  owned: (ctx: Ctx, id: string, browserSession: string | undefined) => Promise<SessionRow>;
}) {
  const { db, repo, audit, pool } = deps;
  const clientOf = (s: SessionRow) => pool.client({ tenantId: s.tenantId, userId: s.ownerId });

  /** The session's turns (prompts) as the runtime holds them, with the revert state. */
  async function turnsOf(client: RuntimeClient, upstreamId: string) {
    const [messages, reverted] = await Promise.all([client.messages(upstreamId), client.revertState(upstreamId)]);
    const prompts = messages.filter((m) => m.info.role === 'user');
    const at = reverted ? prompts.findIndex((m) => m.info.id === reverted.messageId) : -1;
    return { prompts, revertedAt: at, reverted };
  }

  const snapshotsOn = () => {
    if (!deps.snapshots) throw new ConflictError('undo and redo are off on this service: its runtimes keep no snapshots of the workspace (AGENTWS_RUNTIME_SNAPSHOTS=off)', { code: 'snapshots_off' });
  };

  /** A turn in flight (queued, being sent, running) refuses an undo or a redo: the runtime would race it. */
  async function notRunning(s: SessionRow, client: RuntimeClient, what: string): Promise<void> {
    const busy = (await repo.turnInFlight(db, s.tenantId, s.id)) || (s.upstreamId ? (await client.busySessions()).includes(s.upstreamId) : false);
    if (busy) throw new ConflictError(`a turn is running or queued in this session: ${what} once it has ended`, { code: 'turn_running' });
  }

  const service = {
    /**
     * The files the session's turns changed (the whole session, from before its first turn to after its
     * last, undone turns left out), or those of one turn (`messageId`: its prompt). Owner only.
     */
    async list(ctx: Ctx, input: { id: string; messageId?: string; browserSession?: string }): Promise<ChangeSet> {
      const s = await deps.owned(ctx, input.id, input.browserSession);
      const empty: ChangeSet = { sessionId: s.id, messageId: input.messageId ?? null, files: [], totals: totalsOf([]), turns: [], reverted: null, snapshots: deps.snapshots };
      if (!s.upstreamId) {
        if (input.messageId) throw new NotFoundError('turn not found in this session');
        return empty;
      }
      const client = await clientOf(s);
      if (input.messageId) {
        // One turn: the runtime's own diff of it (opencode GET /session/:id/diff?messageID).
        const [diffs, reverted] = await Promise.all([client.turnDiff(s.upstreamId, input.messageId), client.revertState(s.upstreamId)]);
        if (!diffs.length && !(await client.messageExists(s.upstreamId, input.messageId))) throw new NotFoundError('turn not found in this session');
        const files = capDiffs(turnChanges(diffs));
        return { ...empty, files, totals: totalsOf(files), reverted: reverted ? { messageId: reverted.messageId, turns: 0 } : null };
      }
      const { prompts, revertedAt, reverted } = await turnsOf(client, s.upstreamId);
      const kept = revertedAt >= 0 ? prompts.slice(0, revertedAt) : prompts;
      const files = capDiffs(sessionChanges(kept.map(diffsOf)));
      const turns = prompts.map((m, i) => {
        const changed = turnChanges(diffsOf(m));
        const t = totalsOf(changed);
        return { messageId: m.info.id, files: t.files, additions: t.additions, deletions: t.deletions, paths: changed.slice(0, 20).map((f) => f.path), reverted: revertedAt >= 0 && i >= revertedAt };
      });
      return { ...empty, files, totals: totalsOf(files), turns, reverted: reverted ? { messageId: reverted.messageId, turns: revertedAt >= 0 ? prompts.length - revertedAt : 0 } : null };
    },

    /**
     * Undoes a turn and every later one (`messageId`: the turn's prompt): the runtime puts the files they
     * changed back as they were before it, and the transcript reads as before it (messages). The next
     * prompt drops the undone turns for good; a redo (unrevert) brings them back until then. Refused
     * (409) while a turn runs or waits; audited.
     */
    async revert(ctx: Ctx, input: { id: string; messageId: string; browserSession?: string }): Promise<ChangeSet> {
      requireTokenScope(ctx, 'sessions');
      requirePermission(ctx, 'agents.create');
      const s = await deps.owned(ctx, input.id, input.browserSession);
      snapshotsOn();
      if (!s.upstreamId) throw new NotFoundError('turn not found in this session');
      const client = await clientOf(s);
      await notRunning(s, client, 'undo it');
      const { prompts } = await turnsOf(client, s.upstreamId);
      const at = prompts.findIndex((m) => m.info.id === input.messageId);
      if (at < 0) throw new NotFoundError('turn not found in this session (messageId must be the id of a prompt of it)');
      await client.revert(s.upstreamId, input.messageId);
      await db.transaction((tx) =>
        audit.record(tx, ctx, { action: 'session.revert', target: `session:${s.id}`, sessionId: s.id, details: { messageId: input.messageId, turns: prompts.length - at } }),
      );
      return service.list(ctx, { id: s.id, browserSession: input.browserSession });
    },

    /** Redoes what the last undo undid (files and transcript). 409 when nothing is undone, or while a turn runs; audited. */
    async unrevert(ctx: Ctx, input: { id: string; browserSession?: string }): Promise<ChangeSet> {
      requireTokenScope(ctx, 'sessions');
      requirePermission(ctx, 'agents.create');
      const s = await deps.owned(ctx, input.id, input.browserSession);
      snapshotsOn();
      const nothing = () => new ConflictError('nothing to redo: no turn of this session is undone (or a prompt since has dropped the undone turns)', { code: 'nothing_to_redo' });
      if (!s.upstreamId) throw nothing();
      const client = await clientOf(s);
      await notRunning(s, client, 'redo it');
      const reverted = await client.revertState(s.upstreamId);
      if (!reverted) throw nothing();
      // What the undone turns deleted, to delete again: opencode 1.18.33's unrevert writes back the files of
      // the workspace as it was before the undo, but leaves those the undo brought back.
      const { prompts, revertedAt } = await turnsOf(client, s.upstreamId);
      const gone = revertedAt >= 0 ? deletedBy(prompts.slice(revertedAt).map(diffsOf)) : [];
      await client.unrevert(s.upstreamId);
      if (gone.length && !(await client.removeFiles(gone))) ctx.log.warn({ sessionId: s.id, files: gone.length }, 'redo: the files the undone turns deleted could not all be deleted again');
      await db.transaction((tx) => audit.record(tx, ctx, { action: 'session.unrevert', target: `session:${s.id}`, sessionId: s.id, details: { messageId: reverted.messageId } }));
      return service.list(ctx, { id: s.id, browserSession: input.browserSession });
    },
  };
  return service;
}

export type SessionChanges = ReturnType<typeof createSessionChanges>;
