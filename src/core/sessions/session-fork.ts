import type { Database } from '../../db/database.js';
import { requirePermission, requireTokenScope, requireUser } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { NotFoundError, ValidationError } from '../../kernel/errors.js';
import type { AuditService } from '../audit/audit.service.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import { branchTitle, forkCut, SHARED_WORKSPACE_NOTE } from './fork-fns.js';
import type { SessionRow, SessionsRepo } from './sessions.repo.js';
import type { TurnSnapshots } from './turn-snapshots.js';

/**
 * Branching a session: a new session of the same owner whose transcript is a copy of the
 * original's up to a message (the runtime's fork), continued on its own from there. Its template
 * snapshot and chosen model come along. The workspace does not: it is the owner's one workspace, which
 * every session of theirs shares (workspace-dir.ts), so the answer says so (`workspace: "shared"`). The
 * snapshots of the copied turns come along (as refs of the same snapshots): their changes show in the
 * branch, and an undo there puts the files back as before one of them. Writing the workspace back as of
 * the message when branching is not offered: it would change the files under the person's other sessions.
 *
 * What it lets reach: only the caller's own session (another's is 404, as every session route), copied
 * into a session of the same owner, in the same runtime and directory; nothing of anyone else's.
 */
export function createSessionFork(deps: {
  db: Database;
  repo: Pick<SessionsRepo, 'insert'>;
  audit: AuditService;
  pool: Pick<RuntimePool, 'client'>;
  /** The workspace's snapshots around turns: a branch gets those of the turns it copied. Absent: none. */
  snapshots?: Pick<TurnSnapshots, 'copyTurns'>;
  owned: (ctx: Ctx, id: string, browserSession: string | undefined) => Promise<SessionRow>;
}) {
  const { db, repo, audit, pool } = deps;
  return {
    /** Branches the session at `messageId` (kept, with the rest of its answer) into a new session; audited. */
    async fork(ctx: Ctx, input: { id: string; messageId: string; title?: string; browserSession?: string }) {
      requirePermission(ctx, 'agents.create');
      requireTokenScope(ctx, 'sessions');
      requireUser(ctx, 'sessions');
      const s = await deps.owned(ctx, input.id, input.browserSession);
      const title = input.title?.trim() || branchTitle(s.title);
      if (title.length > 200) throw new ValidationError('title: at most 200 characters', { details: { field: 'title' } });
      const notFound = () => new NotFoundError('messageId: the session has no such message', { details: { field: 'messageId' } });
      if (!s.upstreamId) throw notFound();
      const client = await pool.client({ tenantId: s.tenantId, userId: s.ownerId });
      const [messages, reverted] = await Promise.all([client.messages(s.upstreamId), client.revertState(s.upstreamId)]);
      // Undone turns (session-changes.ts) are not in the transcript the person sees: not in a branch either.
      const visible = reverted ? messages.filter((m) => m.info.id < reverted.messageId) : messages;
      const cut = forkCut(visible, input.messageId);
      if (!cut) throw notFound();
      const upstreamId = await client.fork(s.upstreamId, cut.before ?? reverted?.messageId ?? null);
      const branch = await db.transaction(async (tx) => {
        const b = await repo.insert(tx, {
          tenantId: s.tenantId,
          ownerId: s.ownerId,
          title,
          templateSlug: s.templateSlug,
          systemPrompt: s.systemPrompt,
          model: s.model,
          chosenModel: s.chosenModel,
          snapshotAt: s.snapshotAt,
          directory: s.directory,
          channel: ctx.channel,
          browserSession: s.browserSession,
          upstreamId,
        });
        await audit.record(tx, ctx, { action: 'session.fork', target: `session:${b.id}`, sessionId: b.id, details: { from: s.id, messageId: input.messageId, messages: cut.kept } });
        return b;
      });
      // The copied turns keep what they changed (Changes, and Undo in the branch), under the branch's ids:
      // the runtime copied the messages in order, so the prompts pair up in order.
      if (deps.snapshots) {
        const was = visible.slice(0, cut.kept).filter((m) => m.info.role === 'user').map((m) => m.info.id);
        const now = (await client.messages(upstreamId).catch(() => [])).filter((m) => m.info.role === 'user').map((m) => m.info.id);
        if (was.length === now.length) await deps.snapshots.copyTurns({ tenantId: s.tenantId, userId: s.ownerId }, s.id, branch.id, was.map((id, i) => [id, now[i]]));
      }
      return { sessionId: branch.id, title: branch.title, from: { sessionId: s.id, messageId: input.messageId }, messages: cut.kept, workspace: 'shared' as const, message: SHARED_WORKSPACE_NOTE };
    },
  };
}
