import type { Database } from '../../db/database.js';
import { requirePermission, requireTokenScope, requireUser } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { ConflictError, NotFoundError, ValidationError } from '../../kernel/errors.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import { workspaceDir } from '../../lib/data-paths.js';
import type { AuditService } from '../audit/audit.service.js';
import type { RuntimeOwner } from '../runtime/host/runtime-host.js';
import { splitPath } from '../runtime/host/workspace-files.js';
import type { TeamsRepo } from '../teams/teams.repo.js';
import type { UserRow, UsersRepo } from '../users/users.repo.js';
import type { CopySkips, WorkspaceFilesService } from '../workspace/workspace-files.service.js';
import type { SessionStreams } from './session-stream.js';
import type { SessionSharesRepo, ShareMode, ShareRow } from './session-shares.repo.js';
import type { SessionRow, SessionsRepo } from './sessions.repo.js';
import type { SessionsService } from './sessions.service.js';
import { handoverFolder, shareTargets } from './share-rules.js';

/** A hand-over copies at most this many files and bytes of the previous owner's workspace (besides the new owner's quota). */
const HANDOVER_MAX_FILES = 20_000;
const HANDOVER_MAX_BYTES = 2 * 1024 ** 3;

export interface Person {
  userId: string;
  handle: string;
  email: string;
  name: string;
}

export interface ShareView {
  shareId: string;
  mode: ShareMode;
  /** When it was made: an as-of-now share shows the transcript as it was then. */
  createdAt: Date;
  person: Person | null;
  team: { teamId: string; name: string } | null;
}

const personOf = (u: Pick<UserRow, 'id' | 'handle' | 'email' | 'displayName'>): Person => ({ userId: u.id, handle: u.handle, email: u.email, name: u.displayName || u.handle });
const shareView = (r: ShareRow): ShareView => ({
  shareId: r.id,
  mode: r.mode,
  createdAt: r.createdAt,
  person: r.userId ? { userId: r.userId, handle: r.userHandle ?? '', email: r.userEmail ?? '', name: r.userName || r.userHandle || '' } : null,
  team: r.teamId ? { teamId: r.teamId, name: r.teamName ?? '' } : null,
});

/**
 * Sessions shared read-only and handed over. A share lets people or a team of the owner's own
 * tenant read a session: its transcript, its changes, and (live) its stream; nothing else (prompt, stop,
 * permissions, undo, delete, files, terminal stay the owner's: those routes answer a viewer 404, as a
 * stranger). A hand-over makes a teammate the owner: the session continues in their runtime and workspace.
 *
 * What a share lets another person reach: the session's messages (as of the share, or as they come), the
 * diffs of its turns (as-of-now: of the turns then), its live events. Never the owner's workspace itself,
 * runtime, or other sessions; never across tenants (targets are looked up in the owner's tenant only, so a
 * person or team of another one is "not found" to the request, and a viewer of another tenant has no share).
 */
export function createSessionSharesService(deps: {
  db: Database;
  repo: SessionSharesRepo;
  sessionsRepo: Pick<SessionsRepo, 'turnInFlight' | 'handOver'>;
  users: Pick<UsersRepo, 'findByRef' | 'findById' | 'list'>;
  teams: Pick<TeamsRepo, 'find' | 'findByName' | 'list'>;
  audit: AuditService;
  streams: Pick<SessionStreams, 'accessChanged' | 'publish'>;
  sessions: Pick<SessionsService, 'owned' | 'transcriptOf'>;
  files: Pick<WorkspaceFilesService, 'existsIn' | 'copyBetween'>;
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  ensureWorkspace: (dir: string) => Promise<void>;
  /** Starts the new owner's runtime after a hand-over, so their first turn does not wait for it (best effort). */
  prestart: (owner: RuntimeOwner) => Promise<void>;
  dataDir: string;
}) {
  const { db, repo, audit, streams } = deps;

  /** The owner's top-level session: only its owner shares it, hands it over, or sees whom it is shared with. */
  async function ownedTop(ctx: Ctx, id: string, browserSession?: string): Promise<SessionRow> {
    requireTokenScope(ctx, 'sessions');
    const s = await deps.sessions.owned(ctx, id, browserSession);
    if (s.parentId) throw new NotFoundError('session not found');
    return s;
  }

  /** A person of the tenant, active, named by id, email or handle; else a refusal naming the field. */
  async function personIn(tenantId: string, ref: string, field: string): Promise<UserRow> {
    const u = await deps.users.findByRef(db, tenantId, ref);
    if (!u || u.deactivatedAt) throw new ValidationError(`body/${field}: no active person "${ref.slice(0, 100)}" in your organisation`, { code: 'unknown_person', details: { field } });
    return u;
  }

  const changed = (sessionId: string) => streams.accessChanged(sessionId).catch(() => {});

  return {
    /**
     * Shares the caller's session read-only with people and/or teams of their tenant, live or as of now
     * (the transcript is kept as it is now). A share for a person or team who already has one replaces it.
     * Each share is audited.
     */
    async create(ctx: Ctx, input: { id: string; people?: string[]; teams?: string[]; mode: ShareMode; browserSession?: string }): Promise<{ shares: ShareView[] }> {
      const actor = requireUser(ctx, 'sessions');
      const s = await ownedTop(ctx, input.id, input.browserSession);
      if (input.mode !== 'live' && input.mode !== 'as_of_now') throw new ValidationError('body/mode must be live or as_of_now', { details: { field: 'mode' } });
      const named = shareTargets(input);
      const people: UserRow[] = [];
      for (const [i, ref] of named.people.entries()) {
        const u = await personIn(s.tenantId, ref, `people/${i}`);
        if (u.id === s.ownerId) throw new ValidationError(`body/people/${i}: that is you; your sessions are yours already`, { code: 'share_with_self', details: { field: `people/${i}` } });
        if (people.some((p) => p.id === u.id)) throw new ValidationError(`body/people/${i} names a person already named`, { details: { field: `people/${i}` } });
        people.push(u);
      }
      const teams: Array<{ id: string; name: string }> = [];
      for (const [i, ref] of named.teams.entries()) {
        const t = (await deps.teams.find(db, s.tenantId, ref)) ?? (await deps.teams.findByName(db, s.tenantId, ref));
        if (!t) throw new ValidationError(`body/teams/${i}: no team "${ref.slice(0, 100)}" in your organisation`, { code: 'unknown_team', details: { field: `teams/${i}` } });
        if (teams.some((x) => x.id === t.id)) throw new ValidationError(`body/teams/${i} names a team already named`, { details: { field: `teams/${i}` } });
        teams.push(t);
      }
      // As of now: the transcript as it reads at this moment is what the viewers will ever see of it.
      const transcript = input.mode === 'as_of_now' ? await deps.sessions.transcriptOf(s) : null;
      let replaced = 0;
      const ids = await db.transaction(async (tx) => {
        const made: string[] = [];
        for (const target of [...people.map((p) => ({ userId: p.id, teamId: null })), ...teams.map((t) => ({ userId: null, teamId: t.id }))]) {
          replaced += await repo.revokeTarget(tx, s.tenantId, s.id, target, `user:${actor.userId}`);
          const shareId = await repo.insert(tx, { tenantId: s.tenantId, sessionId: s.id, ...target, mode: input.mode, transcript, createdBy: actor.userId });
          await audit.record(tx, ctx, { action: 'session.share', target: `session:${s.id}`, sessionId: s.id, details: { shareId, mode: input.mode, ...target, messages: transcript?.length ?? null } });
          made.push(shareId);
        }
        return made;
      });
      // A live share replaced by an as-of-now one: its followers' streams end.
      if (replaced) await changed(s.id);
      const all = await repo.ofSession(db, s.tenantId, s.id);
      return { shares: ids.map((id) => all.find((r) => r.id === id)).filter((r): r is ShareRow => !!r).map(shareView) };
    },

    /** The shares in force of the caller's session. */
    async list(ctx: Ctx, input: { id: string; browserSession?: string }): Promise<{ shares: ShareView[] }> {
      const s = await ownedTop(ctx, input.id, input.browserSession);
      return { shares: (await repo.ofSession(db, s.tenantId, s.id)).map(shareView) };
    },

    /** Ends a share of the caller's session: its viewers lose the session at once, a live follower's stream ends. Audited. */
    async revoke(ctx: Ctx, input: { id: string; shareId: string; browserSession?: string }): Promise<void> {
      const actor = requireUser(ctx, 'sessions');
      const s = await ownedTop(ctx, input.id, input.browserSession);
      await db.transaction(async (tx) => {
        const r = await repo.revoke(tx, s.tenantId, s.id, input.shareId, `user:${actor.userId}`);
        if (!r) throw new NotFoundError('share not found');
        await audit.record(tx, ctx, { action: 'session.share_revoke', target: `session:${s.id}`, sessionId: s.id, details: { shareId: input.shareId, ...r } });
      });
      await changed(s.id);
    },

    /** The sessions of other people shared with the caller or their teams, latest activity first. */
    async sharedWithMe(ctx: Ctx) {
      const actor = requireUser(ctx, 'sessions');
      requireTokenScope(ctx, 'sessions');
      const rows = await repo.sharedWith(db, actor.tenantId, actor.userId);
      return {
        sessions: rows.map((r) => ({
          sessionId: r.sessionId,
          title: r.title,
          updatedAt: r.updatedAt,
          owner: { userId: r.ownerId, handle: r.ownerHandle, email: r.ownerEmail, name: r.ownerName || r.ownerHandle },
          shareId: r.shareId,
          mode: r.mode,
          sharedAt: r.sharedAt,
          team: r.teamName,
        })),
      };
    },

    /**
     * What the caller may do with a session: its owner, or a viewer (with how it is shared). 404 for
     * anyone else. The dashboard opens a shared session read-only from it.
     */
    async access(ctx: Ctx, input: { id: string; browserSession?: string; readable: SessionsService['readable'] }) {
      const { session: s, share } = await input.readable(ctx, input.id, input.browserSession);
      const owner = await deps.users.findById(db, s.tenantId, s.ownerId);
      return {
        sessionId: s.id,
        title: s.title,
        role: share ? ('viewer' as const) : ('owner' as const),
        mode: share?.mode ?? null,
        asOf: share?.mode === 'as_of_now' ? share.asOf : null,
        owner: owner ? personOf(owner) : { userId: s.ownerId, handle: '', email: '', name: 'a former member' },
      };
    },

    /**
     * People and teams of the caller's tenant to share with, by a part of their name, handle or email
     * (people from two characters on; at most 10 of each). Never the caller, never a deactivated person.
     */
    async targets(ctx: Ctx, input: { q: string }): Promise<{ people: Person[]; teams: Array<{ teamId: string; name: string; members: number }> }> {
      const actor = requireUser(ctx, 'sessions');
      requireTokenScope(ctx, 'sessions');
      const q = input.q.trim().toLowerCase();
      const people =
        q.length < 2
          ? []
          : (await deps.users.list(db, actor.tenantId))
              .filter((u) => !u.deactivatedAt && u.id !== actor.userId && [u.handle, u.email, u.displayName].some((x) => x.toLowerCase().includes(q)))
              .slice(0, 10)
              .map(personOf);
      const teams = (await deps.teams.list(db, actor.tenantId))
        .filter((t) => !q || t.name.toLowerCase().includes(q))
        .slice(0, 10)
        .map((t) => ({ teamId: t.id, name: t.name, members: t.members.length }));
      return { people, teams };
    },

    /**
     * Hands the caller's session to a teammate (same tenant, active, whose role runs agents), who continues
     * it in their own runtime, workspace and cost: the conversation so far is kept by the service (shown
     * before the new messages; the teammate's first turn gives it to their agent), and the caller's
     * workspace (or `folder` of it) is copied into a new folder of the teammate's (handed-over/...). The
     * caller keeps a live read-only share unless `keepAccess` is false; the session's other shares end
     * (the new owner decides whom to show it). Refused while a turn runs or waits. Audited.
     */
    async handOver(ctx: Ctx, input: { id: string; to: string; folder?: string; keepAccess?: boolean; browserSession?: string }) {
      const actor = requireUser(ctx, 'sessions');
      requirePermission(ctx, 'agents.create');
      const s = await ownedTop(ctx, input.id, input.browserSession);
      const fromPath = input.folder ? splitPath(input.folder, 'folder').join('/') : '';
      const to = await personIn(s.tenantId, input.to, 'to');
      if (to.id === s.ownerId) throw new ValidationError('body/to: that is you; hand the session to somebody else', { code: 'handover_to_self', details: { field: 'to' } });
      const perms = await deps.permissionsOf(s.tenantId, to.id);
      if (!perms.agents.create) throw new ValidationError(`body/to: ${to.displayName || to.handle}'s role cannot run agents, so they could not continue the session`, { code: 'cannot_run_agents', details: { field: 'to' } });
      if (await deps.sessionsRepo.turnInFlight(db, s.tenantId, s.id)) throw new ConflictError('a turn is running or queued in this session: hand it over once it has ended', { code: 'turn_running' });

      const from: RuntimeOwner = { tenantId: s.tenantId, userId: s.ownerId };
      const target: RuntimeOwner = { tenantId: s.tenantId, userId: to.id };
      const transcript = await deps.sessions.transcriptOf(s);
      const directory = workspaceDir(deps.dataDir, target);
      await deps.ensureWorkspace(directory);
      const folder = await handoverFolder(s.title, s.id, (p) => deps.files.existsIn(target, p));
      const copy: { files: number; bytes: number; skipped: CopySkips } = await deps.files.copyBetween(from, target, { fromPath, toDir: folder, maxFiles: HANDOVER_MAX_FILES, maxBytes: HANDOVER_MAX_BYTES });
      const keep = input.keepAccess !== false;
      await db.transaction(async (tx) => {
        if (!(await deps.sessionsRepo.handOver(tx, s.tenantId, s.id, s.ownerId, to.id, directory))) throw new NotFoundError('session not found');
        // A prompt accepted while the files were copied would run in the new owner's runtime, at their cost: refused instead.
        if (await deps.sessionsRepo.turnInFlight(tx, s.tenantId, s.id)) throw new ConflictError('a turn was queued in this session meanwhile: hand it over once it has ended', { code: 'turn_running' });
        const n = await repo.revokeAll(tx, s.tenantId, s.id, `user:${actor.userId}`);
        if (keep) await repo.insert(tx, { tenantId: s.tenantId, sessionId: s.id, userId: s.ownerId, teamId: null, mode: 'live', transcript: null, createdBy: to.id });
        await repo.insertHandover(tx, { tenantId: s.tenantId, sessionId: s.id, fromUserId: s.ownerId, toUserId: to.id, transcript, folder: copy.files ? folder : null, files: { ...copy, from: fromPath || '.' } });
        await audit.record(tx, ctx, {
          action: 'session.handover',
          target: `session:${s.id}`,
          sessionId: s.id,
          details: { from: s.ownerId, to: to.id, messages: transcript.length, folder: copy.files ? folder : null, files: copy.files, bytes: copy.bytes, skipped: copy.skipped, keptAccess: keep, sharesEnded: n },
        });
      });
      // Followers who may no longer read it (the previous owner without a share, ended shares): streams end.
      await changed(s.id);
      await streams.publish(s.id, 'session.handed_over', { to: personOf(to), message: `This session was handed over to ${to.displayName || to.handle}.` }).catch(() => {});
      void deps.prestart(target).catch(() => {});
      return {
        sessionId: s.id,
        owner: personOf(to),
        transcript: { messages: transcript.length },
        workspace: { folder: copy.files ? folder : null, files: copy.files, bytes: copy.bytes, skipped: copy.skipped },
        keptAccess: keep,
      };
    },
  };
}
