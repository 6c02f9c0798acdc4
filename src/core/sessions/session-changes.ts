import type { Database } from '../../db/database.js';
import { requirePermission, requireTokenScope } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { ConflictError, NotFoundError } from '../../kernel/errors.js';
import type { AuditService } from '../audit/audit.service.js';
import type { FileChange } from '../runtime/host/workspace-snapshots.js';
import type { RuntimeClient } from '../runtime/runtime-client.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import { capDiffs, totalsOf } from './change-sets.js';
import type { SessionRow, SessionsRepo } from './sessions.repo.js';
import type { TurnRefs, TurnSnapshots } from './turn-snapshots.js';

/**
 * What a session's turns changed in the workspace, and undo and redo of turns. The service
 * takes a snapshot of the person's workspace just before each turn is handed to the runtime and one when
 * it ends (turn-snapshots.ts), on the host that holds the files, into a store of its own outside the
 * sandbox (host/workspace-snapshots.ts: a confined walk, never git on the workspace). A turn's changes
 * are the diff of its two snapshots; the session's, from before its first turn kept to after its last; an
 * undo writes the workspace back to a turn's before-snapshot (the state just before it saved as the redo
 * point) and asks the runtime to hide the turns from the transcript (opencode's revert, which with its own
 * snapshots off touches no file); a redo writes the redo point back and unhides them.
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
  /** Whether the service keeps snapshots (AGENTWS_RUNTIME_SNAPSHOTS): off, nothing is listed and undo is refused. */
  snapshots: boolean;
  /** false: the snapshots these changes need were not taken (before snapshots were on, or one failed). */
  recorded: boolean;
  /** The snapshot after the turn is still being taken. */
  pending: boolean;
  /** Files too large to keep: neither diffed nor undone. */
  notKept: string[];
}

export function createSessionChanges(deps: {
  db: Database;
  repo: Pick<SessionsRepo, 'turnInFlight'>;
  audit: AuditService;
  pool: Pick<RuntimePool, 'client'>;
  snapshots: TurnSnapshots;
  /** The session the caller may act on, else 404 (sessions.service.ts owned). */
  owned: (ctx: Ctx, id: string, browserSession: string | undefined) => Promise<SessionRow>;
  /**
   * The session the caller may read (theirs, or shared with them: session-shares), for the list alone;
   * `upTo`: a session shared as of a moment shows the turns up to its last prompt then, nothing later.
   */
  readable?: (ctx: Ctx, id: string, browserSession: string | undefined) => Promise<{ session: SessionRow; upTo: string | null }>;
}) {
  const { db, repo, audit, pool, snapshots } = deps;
  const clientOf = (s: SessionRow) => pool.client({ tenantId: s.tenantId, userId: s.ownerId });
  const ownerOf = (s: SessionRow) => ({ tenantId: s.tenantId, userId: s.ownerId });

  /** The session's turns (prompts, oldest first) as the runtime holds them, with the revert state. */
  async function turnsOf(client: RuntimeClient, upstreamId: string) {
    const [messages, reverted] = await Promise.all([client.messages(upstreamId), client.revertState(upstreamId)]);
    const prompts = messages.filter((m) => m.info.role === 'user').map((m) => m.info.id);
    const at = reverted ? prompts.indexOf(reverted.messageId) : -1;
    return { prompts, revertedAt: at, reverted };
  }

  const snapshotsOn = () => {
    if (!snapshots.enabled) throw new ConflictError('undo and redo are off on this service: it keeps no snapshots of workspaces (AGENTWS_RUNTIME_SNAPSHOTS=off)', { code: 'snapshots_off' });
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
      const { session: s, upTo } = deps.readable ? await deps.readable(ctx, input.id, input.browserSession) : { session: await deps.owned(ctx, input.id, input.browserSession), upTo: null };
      if (upTo !== null && input.messageId && input.messageId > upTo) throw new NotFoundError('turn not found in this session');
      const empty: ChangeSet = { sessionId: s.id, messageId: input.messageId ?? null, files: [], totals: totalsOf([]), turns: [], reverted: null, snapshots: snapshots.enabled, recorded: true, pending: false, notKept: [] };
      if (!s.upstreamId) {
        if (input.messageId) throw new NotFoundError('turn not found in this session');
        return empty;
      }
      const client = await clientOf(s);
      const owner = ownerOf(s);
      const diff = async (a: string | undefined, b: string | undefined, patch: boolean) => (a && b ? snapshots.changes(owner, a, b, patch) : null);
      if (input.messageId) {
        // One turn: its snapshots name it as this session's (else the runtime is asked: a turn not recorded);
        // the transcript itself (every step of every turn) is not read.
        const messageId = input.messageId;
        await snapshots.settled(s.id);
        const [refs, reverted] = await Promise.all([snapshots.enabled ? snapshots.refsOf(owner, s.id) : null, client.revertState(s.upstreamId)]);
        const t: TurnRefs = refs?.turns.get(messageId) ?? {};
        if (!t.before && !(await client.messageExists(s.upstreamId, messageId))) throw new NotFoundError('turn not found in this session (messageId must be the id of a prompt of it)');
        const c = await diff(t.before, t.after, true);
        const files = capDiffs(c?.files ?? []);
        return { ...empty, files, totals: totalsOf(files), reverted: reverted ? { messageId: reverted.messageId, turns: 0 } : null, recorded: !!t.before, pending: !!t.before && !t.after, notKept: c?.notKept ?? [] };
      }
      const all = await turnsOf(client, s.upstreamId);
      const prompts = upTo === null ? all.prompts : all.prompts.filter((m) => m <= upTo);
      const { revertedAt: at, reverted } = all;
      const revertedAt = at >= prompts.length ? -1 : at;
      const revertedOut = reverted ? { messageId: reverted.messageId, turns: revertedAt >= 0 ? prompts.length - revertedAt : 0 } : null;
      if (!snapshots.enabled) return { ...empty, reverted: revertedOut, recorded: false };
      await snapshots.settled(s.id);
      const { turns } = await snapshots.refsOf(owner, s.id);
      const kept = revertedAt >= 0 ? prompts.slice(0, revertedAt) : prompts;
      const first = kept.find((m) => turns.get(m)?.before);
      const last = [...kept].reverse().find((m) => turns.get(m)?.after);
      const lastTurn = kept.at(-1);
      const whole = first && last ? await diff(turns.get(first)!.before, turns.get(last)!.after, true) : null;
      const summaries = await Promise.all(
        prompts.map(async (m, i): Promise<TurnSummary> => {
          const t = turns.get(m);
          const c = await diff(t?.before, t?.after, false).catch(() => null);
          const changed = c?.files ?? [];
          const sum = totalsOf(changed);
          return { messageId: m, files: sum.files, additions: sum.additions, deletions: sum.deletions, paths: changed.slice(0, 20).map((f) => f.path), reverted: revertedAt >= 0 && i >= revertedAt };
        }),
      );
      const files = capDiffs(whole?.files ?? []);
      const lastRefs = lastTurn ? turns.get(lastTurn) : undefined;
      return {
        ...empty, files, totals: totalsOf(files), turns: summaries, reverted: revertedOut,
        recorded: !kept.length || !!first, pending: !!lastRefs?.before && !lastRefs.after, notKept: whole?.notKept ?? [],
      };
    },

    /**
     * Undoes a turn and every later one (`messageId`: the turn's prompt): the workspace is written back as
     * it was just before the turn (its before-snapshot; the state now saved as the redo point), and the
     * runtime hides the turns from the transcript. The next prompt drops the undone turns for good; a redo
     * (unrevert) brings them back until then. Refused (409) while a turn runs or waits; audited.
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
      const at = prompts.indexOf(input.messageId);
      if (at < 0) throw new NotFoundError('turn not found in this session (messageId must be the id of a prompt of it)');
      await snapshots.settled(s.id);
      const before = (await snapshots.refsOf(ownerOf(s), s.id)).turns.get(input.messageId)?.before;
      if (!before) throw new ConflictError('this turn\'s snapshot was not taken (it ran before snapshots were on, or the snapshot failed): its files cannot be put back', { code: 'not_recorded' });
      const r = await snapshots.restore(ownerOf(s), s.id, before);
      await client.revert(s.upstreamId, input.messageId);
      await db.transaction((tx) =>
        audit.record(tx, ctx, { action: 'session.revert', target: `session:${s.id}`, sessionId: s.id, details: { messageId: input.messageId, turns: prompts.length - at, written: r.written, deleted: r.deleted, failed: r.failed.length } }),
      );
      if (r.failed.length) ctx.log.warn({ sessionId: s.id, failed: r.failed.slice(0, 20) }, 'undo: some files could not be put back');
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
      const { redo } = await snapshots.refsOf(ownerOf(s), s.id);
      if (!redo) throw nothing();
      const r = await snapshots.restore(ownerOf(s), s.id, redo);
      await snapshots.dropRedo(ownerOf(s), s.id);
      await client.unrevert(s.upstreamId);
      await db.transaction((tx) => audit.record(tx, ctx, { action: 'session.unrevert', target: `session:${s.id}`, sessionId: s.id, details: { messageId: reverted.messageId, written: r.written, deleted: r.deleted, failed: r.failed.length } }));
      return service.list(ctx, { id: s.id, browserSession: input.browserSession });
    },
  };
  return service;
}
