import { existsSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Database, Tx } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { AuditRepo } from '../audit/audit.repo.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission, tenantOf } from '../../kernel/authz.js';
import type { GitConnectionsRepo } from '../connectors/git-connections.repo.js';
import type { Ctx } from '../../kernel/context.js';
import { ConflictError, ForbiddenError, NotFoundError, UnauthenticatedError } from '../../kernel/errors.js';
import type { MemoriesRepo } from '../memories/memories.repo.js';
import type { RuntimeOwner } from '../runtime/host/runtime-host.js';
import type { SessionRow, SessionsRepo } from '../sessions/sessions.repo.js';
import type { SkillsRepo } from '../skills/skills.repo.js';
import type { TeamsRepo } from '../teams/teams.repo.js';
import type { TenantsRepo } from '../tenants/tenants.repo.js';
import type { RoleAssignmentsRepo } from '../rbac/role-assignments.repo.js';
import type { GatewaysRepo } from '../gateways/gateways.repo.js';
import type { SpendingRepo } from '../usage/spending.repo.js';
import type { UserRow, UsersRepo } from '../users/users.repo.js';
import { createArchiveWriter } from '../backup/backup-archive.js';
import { workspaceDir } from '../../lib/data-paths.js';
import {
  EXPORT_FILES,
  exportManifest,
  isAboutPerson,
  placeholderUser,
  pseudonymOf,
  pseudonymousUuid,
  scrubAuditEntry,
  sharedMemoryPolicy,
  type ExportCounts,
  type Person,
} from './privacy-fns.js';
import type { SharedMemoryPolicy } from '../tenants/tenant-settings-fns.js';

/**
 * A person's data on request: everything the appliance holds about them as one archive,
 * and their erasure. The data itself stays in its capabilities' tables (their repos hold the SQL); this
 * service decides what belongs to the person and in which order it goes.
 */
export function createPrivacyService(deps: {
  db: Database;
  users: UsersRepo;
  tenants: TenantsRepo;
  assignments: RoleAssignmentsRepo;
  gateways: Pick<GatewaysRepo, 'servedBy'>;
  teams: TeamsRepo;
  sessions: SessionsRepo;
  memories: MemoriesRepo;
  skills: SkillsRepo;
  gitConnections: GitConnectionsRepo;
  spending: SpendingRepo;
  auditRepo: AuditRepo;
  audit: AuditService;
  /** A session's transcript as GET /v1/sessions/:id/messages shows it (starts the owner's runtime if need be). */
  transcriptOf: (s: SessionRow) => Promise<Array<{ info: Record<string, unknown>; parts: Array<Record<string, unknown>> }>>;
  /** Stops the person's runtime wherever it runs (true: it no longer runs). */
  stopRuntime: (owner: RuntimeOwner) => Promise<boolean>;
  /** Ends every sign-in of the person in the erasing transaction (auth.revokeUser). */
  revokeSignIns: (tx: Tx, input: { tenantId: string; userId: string }) => Promise<void>;
  /** The operator user, whom demo mode and the service API key act as. */
  operator: () => Promise<{ tenantId: string; userId: string } | null>;
  /** The key pseudonyms are derived with (the appliance's encryption key: never in an archive or log). */
  pseudonymKey: string;
  dataDir: string;
  clock: Clock;
}) {
  const { db, clock } = deps;

  /** The person the caller may export: anyone of the tenant with admin.manage_users, else only themselves. */
  async function exportable(ctx: Ctx, ref: string): Promise<UserRow> {
    const tenantId = tenantOf(ctx);
    if (ctx.actor.kind === 'anonymous') throw new UnauthenticatedError();
    const self = ctx.actor.kind === 'user' && ctx.actor.userId === ref;
    if (!self) requirePermission(ctx, 'admin.manage_users');
    const user = await deps.users.findByRef(db, tenantId, ref);
    if (!user) throw new NotFoundError(`user "${ref}" not found`);
    return user;
  }

  const workspaceOf = (u: UserRow) => workspaceDir(deps.dataDir, { tenantId: u.tenantId, userId: u.id });
  const runtimeRootOf = (u: UserRow) => join(deps.dataDir, 'runtimes', u.id);

  return {
    /**
     * Writes everything the appliance holds about a person into `file` (a gzip'd tar, 0600, written to
     * `<file>.partial` and renamed when whole; must not exist): the files of EXPORT_FILES and manifest.json
     * (what each file is, counts, each entry's sha256). Their own data for a person, anyone's for
     * admin.manage_users. Transcripts come from the person's runtime (started if need be); one that cannot
     * be read is said so in the manifest's warnings, and the rest is exported. Audited `user.export`.
     */
    async exportPerson(ctx: Ctx, input: { user: string; file: string; appVersion: string }) {
      const user = await exportable(ctx, input.user);
      if (existsSync(input.file) || existsSync(`${input.file}.partial`)) throw new ConflictError(`${input.file} exists: an export never overwrites a file`, { details: { field: 'out' } });
      const tenant = (await deps.tenants.findById(db, user.tenantId))!;
      const tenantId = user.tenantId;
      const [roles, teams, sessions, memories, trajectories, gitConnections, usage, audit] = await Promise.all([
        deps.assignments.roleNames(db, user.id),
        deps.teams.namesOf(db, tenantId, user.id),
        deps.sessions.ofOwner(db, tenantId, user.id),
        deps.memories.ofAuthor(db, tenantId, user.id),
        deps.skills.trajectoriesOfUser(db, tenantId, user.id),
        deps.gitConnections.accountsOfUser(db, tenantId, user.id),
        deps.spending.usageOfUser(db, tenantId, user.id),
        // The database's candidates, decided by the rule erasure follows (whole ids and addresses only).
        deps.auditRepo.aboutPerson(db, tenantId, user).then((entries) => entries.filter((e) => isAboutPerson(e, user))),
      ]);
      const skills = await deps.skills.versionsFromTrajectories(db, tenantId, trajectories.map((t) => t.id));
      const warnings: string[] = [];
      const json = (v: unknown) => Buffer.from(`${JSON.stringify(v, null, 1)}\n`);
      const writer = await createArchiveWriter<ReturnType<typeof exportManifest>>(input.file);
      let transcripts = 0;
      try {
        await writer.addBuffer('profile.json', json({ id: user.id, handle: user.handle, email: user.email, displayName: user.displayName, externalSubject: user.externalSubject, createdAt: user.createdAt, tenant: { id: tenant.id, slug: tenant.slug, name: tenant.name } }));
        await writer.addBuffer('roles.json', json(roles));
        await writer.addBuffer('teams.json', json(teams));
        await writer.addBuffer(
          'sessions.json',
          json(sessions.map((s) => ({ id: s.id, title: s.title, templateSlug: s.templateSlug, model: s.model, channel: s.channel, parentId: s.parentId, planId: s.planId, createdAt: s.createdAt, updatedAt: s.updatedAt, deletedAt: s.deletedAt, transcript: s.upstreamId ? `sessions/${s.id}.json` : null }))),
        );
        // One runtime per person: once it cannot be reached, the other sessions are not tried (each try waits).
        let unreachable: string | null = null;
        for (const s of sessions) {
          if (!s.upstreamId) continue;
          if (unreachable) continue;
          try {
            const messages = await deps.transcriptOf(s);
            await writer.addBuffer(`sessions/${s.id}.json`, json({ sessionId: s.id, title: s.title, messages }));
            transcripts++;
          } catch (err) {
            unreachable = (err as Error).message;
            warnings.push(`transcripts could not be read from the person's runtime (${unreachable}): sessions.json lists the sessions without them. Export again while \`aws serve\` runs.`);
          }
        }
        await writer.addBuffer(
          'memories.json',
          json(memories.map((m) => ({ id: m.id, kind: m.kind, content: m.content, visibility: m.visibility, status: m.status, source: m.source, sessionId: m.sessionId, createdAt: m.createdAt, updatedAt: m.updatedAt }))),
        );
        await writer.addBuffer(
          'trajectories.json',
          json(trajectories.map((t) => ({ id: t.id, sessionId: t.sessionId, messageId: t.messageId, request: t.request, answer: t.answer, tools: t.tools, outcome: t.outcome, costUsd: t.costUsd, skillId: t.skillId, createdAt: t.createdAt }))),
        );
        await writer.addBuffer('skills.json', json(skills));
        await writer.addBuffer('git-connections.json', json(gitConnections));
        await writer.addBuffer('usage.json', json(usage));
        await writer.addBuffer('audit.json', json(audit));
        const counts: ExportCounts = {
          'profile.json': 1,
          'roles.json': roles.length,
          'teams.json': teams.length,
          'sessions.json': sessions.length,
          'sessions/<id>.json': transcripts,
          'memories.json': memories.length,
          'trajectories.json': trajectories.length,
          'skills.json': skills.length,
          'git-connections.json': gitConnections.length,
          'usage.json': usage.length,
          'audit.json': audit.length,
        };
        await writer.finish(exportManifest({ createdAt: clock.now(), appVersion: input.appVersion, tenant: { id: tenant.id, slug: tenant.slug }, userId: user.id, counts, warnings }));
        try {
          await db.transaction(async (tx) => {
            await deps.audit.record(tx, { ...ctx, tenantId }, { action: 'user.export', target: `user:${user.id}`, details: { counts, warnings: warnings.length } });
          });
        } catch (err) {
          // An export nobody can see in the audit log is not handed out.
          rmSync(input.file, { force: true });
          throw err;
        }
        return { file: input.file, bytes: statSync(input.file).size, userId: user.id, counts, warnings, files: Object.keys(EXPORT_FILES) };
      } catch (err) {
        await writer.abort();
        throw err;
      }
    },

    /**
     * Erases a person of the caller's tenant (admin.manage_users): their runtime stopped, their workspace
     * and runtime home (opencode's own session store) removed, their sessions with transcripts, private
     * memories, trajectories, git connections, roles, team memberships, sign-ins and tokens removed; their
     * shared memories removed or kept under a pseudonymous placeholder (tenant setting
     * privacy.sharedMemoriesOnErase); their usage and audit entries kept under a pseudonym. The same
     * refusals as removing a user (not oneself, not the operator user or a gateway's service user, only
     * owners erase owners, never the last owner). Audited `user.erase` under the pseudonym.
     */
    async erasePerson(ctx: Ctx, input: { userId: string }) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const user = await deps.users.findByRef(db, tenantId, input.userId);
      if (!user) throw new NotFoundError('user not found');
      const refuse = async (tx: typeof db | Tx, lock: boolean) => {
        if (ctx.actor.kind === 'user' && ctx.actor.userId === user.id) throw new ConflictError('you cannot erase yourself', { hint: 'Ask another administrator.' });
        const operator = await deps.operator();
        if (operator?.userId === user.id) throw new ConflictError(`${user.email} is the operator user (AGENTWS_OPERATOR_EMAIL): demo mode and the service API key act as them`, { hint: 'Configure another operator first.' });
        const gateways = await deps.gateways.servedBy(tx, tenantId, user.id);
        if (gateways.length) throw new ConflictError(`this is the service user of gateway ${gateways.join(', ')}`, { hint: 'Delete the gateway instead (`npx aws gateway delete`).' });
        const roles = await deps.assignments.roleNames(tx, user.id);
        if (roles.includes('owner')) {
          if (ctx.actor.kind === 'user' && !ctx.actor.roles.includes('owner')) throw new ForbiddenError('only an owner may erase an owner', { details: { permission: 'owner' } });
          const owners = lock ? await deps.assignments.lockAndCountOwners(tx, tenantId) : (await deps.users.list(tx, tenantId)).filter((u) => u.roles.includes('owner')).length;
          if (owners <= 1) throw new ConflictError("cannot erase the tenant's last owner", { hint: 'Make someone else owner first.' });
        }
        return roles;
      };
      // Refused before anything is stopped or removed; checked again, locked, in the erasing transaction.
      await refuse(db, false);
      const owner = { tenantId, userId: user.id };
      const stopped = await deps.stopRuntime(owner);
      if (!stopped) throw new ConflictError("the person's runtime did not stop: nothing was erased", { hint: 'Try again; `npx aws runtime status` shows the runtimes.' });

      const pseudonym = pseudonymOf(deps.pseudonymKey, tenantId, user.id);
      const person: Person = { id: user.id, email: user.email, handle: user.handle, displayName: user.displayName };
      const counts = await db.transaction(async (tx) => {
        await refuse(tx, true);
        const tenant = (await deps.tenants.findById(tx, tenantId))!;
        const policy: SharedMemoryPolicy = sharedMemoryPolicy(tenant.settings);
        await deps.revokeSignIns(tx, owner);
        const sessions = (await deps.sessions.ofOwner(tx, tenantId, user.id)).length;
        const privateMemories = await deps.memories.removeOfAuthor(tx, tenantId, user.id, ['private']);
        let sharedRemoved = 0;
        let sharedKept = 0;
        if (policy === 'remove') {
          sharedRemoved = await deps.memories.removeOfAuthor(tx, tenantId, user.id, ['team', 'org']);
        } else if ((await deps.memories.ofAuthor(tx, tenantId, user.id)).length) {
          // Kept for the others: authored by a placeholder with no roles, sign-ins or email that can sign in.
          const placeholder = await deps.users.insert(tx, { tenantId, ...placeholderUser(pseudonym) });
          sharedKept = await deps.memories.reassignAuthor(tx, tenantId, user.id, placeholder.id);
        }
        const trajectories = await deps.skills.removeTrajectoriesOfUser(tx, tenantId, user.id);
        const gitConnections = await deps.gitConnections.removeOfUser(tx, tenantId, user.id);
        const usageRecords = await deps.spending.pseudonymiseUser(tx, tenantId, user.id, pseudonymousUuid(deps.pseudonymKey, tenantId, user.id));
        await deps.skills.pseudonymiseReviewer(tx, tenantId, `user:${user.id}`, pseudonym);
        // The user row goes last: roles, sign-ins, team memberships, sessions (with their turns), runtime
        // records and placements, plans go with it (foreign keys cascade).
        await deps.users.remove(tx, tenantId, user.id);
        const scrubbed = (await deps.auditRepo.aboutPerson(tx, tenantId, person)).map((e) => ({ id: e.id, ...scrubAuditEntry(e, person, pseudonym) })).filter((e) => e.changed);
        await deps.auditRepo.rewritePerson(tx, scrubbed);
        const counts = { sessions, privateMemories, sharedMemoriesRemoved: sharedRemoved, sharedMemoriesKept: sharedKept, trajectories, gitConnections, usageRecordsPseudonymised: usageRecords, auditEntriesPseudonymised: scrubbed.length };
        await deps.audit.record(tx, { ...ctx, tenantId }, { action: 'user.erase', target: pseudonym, details: { pseudonym, policy, counts } });
        return { ...counts, policy };
      });

      // After commit (the person can no longer start a runtime: their row and sign-ins are gone): their files.
      await deps.stopRuntime(owner).catch(() => false);
      const files = { workspace: existsSync(workspaceOf(user)), runtimeHome: existsSync(runtimeRootOf(user)) };
      rmSync(workspaceOf(user), { recursive: true, force: true });
      rmSync(runtimeRootOf(user), { recursive: true, force: true });
      return { pseudonym, ...counts, filesRemoved: files };
    },
  };
}
