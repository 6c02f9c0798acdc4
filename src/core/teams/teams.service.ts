import type { Database } from '../../db/database.js';
import { isCleanString } from '../../lib/clean-string.js';
import { isUuid } from '../../lib/ids.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { ConflictError, NotFoundError, ValidationError } from '../../kernel/errors.js';
import type { UsersRepo } from '../users/users.repo.js';
import type { TeamRow, TeamsRepo } from './teams.repo.js';

export const TEAM_NAME_MAX = 100;

/** The team as the API shows it: its members with the names people know them by. */
function publicTeam(t: TeamRow) {
  return { id: t.id, name: t.name, createdAt: t.createdAt, members: t.members };
}
export type PublicTeam = ReturnType<typeof publicTeam>;

/**
 * Teams inside a tenant (SPEC.md has no team object; `team` visibility of memories needs one). A user is
 * in zero or more teams. Managing them is user management: admin.manage_users. Another tenant's team or
 * user is answered 404, like one that does not exist.
 */
export function createTeamsService(deps: { db: Database; repo: TeamsRepo; users: UsersRepo; audit: AuditService }) {
  const { db, repo, audit } = deps;

  async function load(ctx: Ctx, ref: string): Promise<TeamRow> {
    const tenantId = requirePermission(ctx, 'admin.manage_users');
    const team = (isUuid(ref) ? await repo.find(db, tenantId, ref) : null) ?? (await repo.findByName(db, tenantId, ref));
    if (!team) throw new NotFoundError(`team "${ref}" not found`);
    return team;
  }

  const checkName = (raw: unknown): string => {
    const name = typeof raw === 'string' ? raw.trim() : '';
    if (!name) throw new ValidationError('name must not be empty');
    if (name.length > TEAM_NAME_MAX) throw new ValidationError(`name must be at most ${TEAM_NAME_MAX} characters`);
    // Control characters would make names that print differently from what they are.
    if (!isCleanString(name) || /[\p{Cc}]/u.test(name)) throw new ValidationError('name must be printable text');
    return name;
  };

  async function member(tenantId: string, userId: string) {
    const user = await deps.users.findById(db, tenantId, userId);
    if (!user) throw new NotFoundError(`user "${userId}" not found`);
    return user;
  }

  return {
    /** The tenant's teams with their members (admin.manage_users). */
    async list(ctx: Ctx): Promise<PublicTeam[]> {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      return (await repo.list(db, tenantId)).map(publicTeam);
    },

    /** One team by id or name (admin.manage_users): what the CLI resolves its arguments with. */
    async get(ctx: Ctx, ref: string): Promise<PublicTeam> {
      return publicTeam(await load(ctx, ref));
    },

    /** Creates a team; names are unique in the tenant, ignoring case (409). */
    async create(ctx: Ctx, input: { name: string }): Promise<PublicTeam> {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const name = checkName(input.name);
      return db.transaction(async (tx) => {
        const team = await repo.insert(tx, tenantId, name);
        if (!team) throw new ConflictError(`a team named "${name}" already exists`);
        await audit.record(tx, { ...ctx, tenantId }, { action: 'team.create', target: `team:${team.id}`, details: { name } });
        return publicTeam(team);
      });
    },

    /** Deletes a team and its memberships; `team` memories of its members stay, seen by their other teams. */
    async remove(ctx: Ctx, ref: string): Promise<void> {
      const team = await load(ctx, ref);
      await db.transaction(async (tx) => {
        if (!(await repo.remove(tx, team.tenantId, team.id))) throw new NotFoundError(`team "${ref}" not found`);
        await audit.record(tx, { ...ctx, tenantId: team.tenantId }, { action: 'team.delete', target: `team:${team.id}`, details: { name: team.name, members: team.members.map((m) => m.userId) } });
      });
    },

    /** Adds a user of the tenant to a team; adding a member again changes nothing (`added: false`). */
    async addMember(ctx: Ctx, ref: string, input: { userId: string }): Promise<{ team: PublicTeam; added: boolean }> {
      const team = await load(ctx, ref);
      const user = await member(team.tenantId, input.userId);
      return db.transaction(async (tx) => {
        if (!(await repo.find(tx, team.tenantId, team.id))) throw new NotFoundError(`team "${ref}" not found`);
        const added = await repo.addMember(tx, team.tenantId, team.id, user.id);
        if (added) {
          await audit.record(tx, { ...ctx, tenantId: team.tenantId }, { action: 'team.member_add', target: `team:${team.id}`, details: { name: team.name, userId: user.id, handle: user.handle } });
        }
        return { team: publicTeam((await repo.find(tx, team.tenantId, team.id))!), added };
      });
    },

    /** Removes a user from a team (404 when they are not in it). */
    async removeMember(ctx: Ctx, ref: string, input: { userId: string }): Promise<PublicTeam> {
      const team = await load(ctx, ref);
      const user = await member(team.tenantId, input.userId);
      return db.transaction(async (tx) => {
        if (!(await repo.removeMember(tx, team.tenantId, team.id, user.id))) throw new NotFoundError(`${user.handle} is not a member of team "${team.name}"`);
        await audit.record(tx, { ...ctx, tenantId: team.tenantId }, { action: 'team.member_remove', target: `team:${team.id}`, details: { name: team.name, userId: user.id, handle: user.handle } });
        return publicTeam((await repo.find(tx, team.tenantId, team.id))!);
      });
    },
  };
}
