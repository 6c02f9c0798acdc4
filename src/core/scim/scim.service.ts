import type { Database, Tx } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission } from '../../kernel/authz.js';
import { actorString, type Ctx } from '../../kernel/context.js';
import { ConflictError, ForbiddenError, NotFoundError, UnauthenticatedError, ValidationError } from '../../kernel/errors.js';
import type { TenantsRepo } from '../tenants/tenants.repo.js';
import type { TeamsRepo } from '../teams/teams.repo.js';
import type { RoleAssignmentsRepo } from '../rbac/role-assignments.repo.js';
import type { RolesRepo } from '../rbac/roles.repo.js';
import type { UsersRepo } from '../users/users.repo.js';
import type { UsersService } from '../users/users.service.js';
import {
  applyGroupPatch,
  applyUserPatch,
  excludesMembers,
  groupFilterable,
  groupFromScim,
  handleBase,
  listResponse,
  looksLikeScimToken,
  matchesFilter,
  newScimToken,
  ownerChangeRefusal,
  paging,
  parseFilter,
  parsePatch,
  renderGroup,
  renderUser,
  SCIM_TOKEN_NAME,
  scimInvalid,
  scimMaxDaysOf,
  scimTokenDays,
  scimTokenHash,
  userFilterable,
  userFromScim,
  type ScimGroupState,
  type ScimUserState,
  type TeamForScim,
  type UserForScim,
} from './scim-fns.js';
import type { ScimRepo } from './scim.repo.js';

/** The query of a SCIM list request (RFC 7644 3.4.2). */
export interface ScimListQuery {
  filter?: string;
  startIndex?: unknown;
  count?: unknown;
  excludedAttributes?: string;
}

/** A SCIM "uniqueness" conflict (409). */
const uniqueness = (detail: string) => new ConflictError(detail, { code: 'uniqueness' });
const notFound = (what: string, id: string) => new NotFoundError(`${what} ${id} not found`);
const isUniqueViolation = (err: unknown) => (err as { code?: string } | null)?.code === '23505';
const DAY_MS = 86_400_000;
/** What SCIM answers for a change it may not make to an owner (a SCIM error with status 403). */
const ownersOnly = (detail: string) => new ForbiddenError(detail, { code: 'owner_managed_by_owners' });

/**
 * SCIM 2.0 provisioning of a tenant's users and teams, for an identity provider holding the
 * tenant's SCIM token. Requests act as the system actor `scim` in the token's tenant; every change is
 * audited in its transaction. Deactivation (`active: false`) ends the person's sign-ins at once in every
 * process, as `user remove` does, and stops their agent (`deactivated`), but keeps the account; DELETE
 * removes it. The token is not the operator: it may not touch owners' access (ownerChangeRefusal), and
 * only an owner mints one.
 */
export function createScimService(deps: {
  db: Database;
  repo: ScimRepo;
  users: UsersRepo;
  usersService: UsersService;
  teams: TeamsRepo;
  roles: RolesRepo;
  assignments: RoleAssignmentsRepo;
  audit: AuditService;
  /** auth.revokeUser: ends a user's sign-ins in the transaction that deactivates them. */
  revokeUser: (tx: Tx, input: { tenantId: string; userId: string }) => Promise<void>;
  operator: () => Promise<{ tenantId: string; userId: string } | null>;
  /** The role sign-in gives new users (AGENTWS_DEFAULT_ROLE): SCIM-created users get it too. */
  defaultRole: string;
  /** The tenant's settings: the longest SCIM token lifetime (tokens.scimMaxDays). */
  tenants: Pick<TenantsRepo, 'findById'>;
  /**
   * A person was deactivated, in this transaction: their queued turns fail here, and once it commits
   * their agent is stopped and their plans cancelled (sessions/person-stop.ts). Absent: nothing more.
   */
  deactivated?: (tx: Tx, ctx: Ctx, owner: { tenantId: string; userId: string }) => Promise<{ queuedTurns: number }>;
  clock: Clock;
}) {
  const { db, repo, audit, clock } = deps;

  async function freeHandle(tx: Tx, tenantId: string, email: string): Promise<string> {
    const base = handleBase(email);
    let handle = base;
    for (let i = 2; await deps.users.handleTaken(tx, tenantId, handle); i++) handle = `${base}-${i}`;
    return handle;
  }

  const stateOf = (u: UserForScim): ScimUserState => ({
    userName: u.email,
    displayName: u.displayName,
    givenName: u.givenName,
    familyName: u.familyName,
    externalId: u.scimExternalId,
    active: u.deactivatedAt === null,
  });

  /** Writes a user's new SCIM state: uniqueness, deactivation (sign-ins ended) or reactivation, audit. */
  async function writeUser(tx: Tx, ctx: Ctx, tenantId: string, before: UserForScim, next: ScimUserState, created: boolean) {
    if (await repo.userIdByEmail(tx, tenantId, next.userName, before.id)) throw uniqueness(`another user has userName ${next.userName}`);
    if (next.externalId && (await repo.userIdByExternalId(tx, tenantId, next.externalId, before.id))) throw uniqueness(`another user has externalId ${next.externalId}`);
    const wasActive = created || before.deactivatedAt === null;
    const renames = !created && next.userName.toLowerCase() !== before.email.toLowerCase();
    if (!created && (renames || (!next.active && wasActive))) {
      // Serialised with grants and revocations of the owner role (as removing an owner is) before asking.
      await deps.assignments.lockAndCountOwners(tx, tenantId);
      if ((await deps.assignments.roleNames(tx, before.id)).includes('owner')) {
        const why = ownerChangeRefusal(stateOf(before), next, before.email);
        if (why) throw ownersOnly(why);
      }
    }
    if (!next.active && wasActive) {
      const op = await deps.operator();
      if (op?.tenantId === tenantId && op.userId === before.id) {
        throw scimInvalid('mutability', 'this is the operator user (AGENTWS_OPERATOR_EMAIL): the service API key and demo mode act as them, so it cannot be deactivated');
      }
    }
    const now = clock.now();
    const deactivatedAt = next.active ? null : wasActive ? now : before.deactivatedAt;
    try {
      await repo.writeUser(tx, tenantId, before.id, { email: next.userName, displayName: next.displayName, givenName: next.givenName, familyName: next.familyName, externalId: next.externalId, deactivatedAt, now });
    } catch (err) {
      if (isUniqueViolation(err)) throw uniqueness('userName or externalId is already taken');
      throw err;
    }
    const changed = created ? [] : (Object.keys(next) as Array<keyof ScimUserState>).filter((k) => next[k] !== stateOf(before)[k]);
    if (!created && changed.length) {
      await audit.record(tx, { ...ctx, tenantId }, { action: 'user.scim_update', target: `user:${before.id}`, details: { changed, email: next.userName } });
    }
    if (!next.active && wasActive) {
      await deps.revokeUser(tx, { tenantId, userId: before.id });
      const stopped = created ? undefined : await deps.deactivated?.(tx, { ...ctx, tenantId }, { tenantId, userId: before.id });
      await audit.record(tx, { ...ctx, tenantId }, {
        action: 'user.deactivate',
        target: `user:${before.id}`,
        details: { email: next.userName, ...(stopped ? { queuedTurnsFailed: stopped.queuedTurns } : {}) },
      });
    } else if (next.active && !wasActive) {
      await audit.record(tx, { ...ctx, tenantId }, { action: 'user.reactivate', target: `user:${before.id}`, details: { email: next.userName } });
    }
  }

  async function loadUser(tx: Tx | Database, tenantId: string, id: string): Promise<UserForScim> {
    const u = await repo.findUser(tx, tenantId, id);
    if (!u) throw notFound('User', id);
    return u;
  }

  async function loadTeam(q: Tx | Database, tenantId: string, id: string): Promise<TeamForScim> {
    const t = await repo.findTeam(q, tenantId, id);
    if (!t) throw notFound('Group', id);
    return t;
  }

  /** Writes a team's new SCIM state: name, externalId, and the member changes (each audited like the teams API). */
  async function writeTeam(tx: Tx, ctx: Ctx, tenantId: string, before: TeamForScim | null, next: ScimGroupState): Promise<string> {
    if (await repo.teamIdByNameOrExternalId(tx, tenantId, next.displayName, next.externalId, before?.id ?? null)) {
      throw uniqueness(`another group has displayName "${next.displayName}"${next.externalId ? ` or externalId ${next.externalId}` : ''}`);
    }
    const known = await repo.existingUserIds(tx, tenantId, next.members);
    const unknown = next.members.filter((m) => !known.has(m));
    if (unknown.length) throw scimInvalid('invalidValue', `members are not users of this tenant: ${unknown.join(', ')}`);
    let id = before?.id;
    if (!id) {
      const team = await deps.teams.insert(tx, tenantId, next.displayName);
      if (!team) throw uniqueness(`another group has displayName "${next.displayName}"`);
      id = team.id;
      await audit.record(tx, { ...ctx, tenantId }, { action: 'team.create', target: `team:${id}`, details: { name: next.displayName, via: 'scim' } });
    }
    try {
      await repo.writeTeam(tx, tenantId, id, { name: next.displayName, externalId: next.externalId });
    } catch (err) {
      if (isUniqueViolation(err)) throw uniqueness('displayName or externalId is already taken');
      throw err;
    }
    if (before && (before.name !== next.displayName || before.scimExternalId !== next.externalId)) {
      await audit.record(tx, { ...ctx, tenantId }, { action: 'team.scim_update', target: `team:${id}`, details: { name: next.displayName, previousName: before.name, externalId: next.externalId } });
    }
    const had = new Set(before?.members.map((m) => m.userId) ?? []);
    const wants = new Set(next.members);
    for (const userId of wants) {
      if (!had.has(userId) && (await deps.teams.addMember(tx, tenantId, id, userId))) {
        await audit.record(tx, { ...ctx, tenantId }, { action: 'team.member_add', target: `team:${id}`, details: { name: next.displayName, userId, via: 'scim' } });
      }
    }
    for (const userId of had) {
      if (!wants.has(userId) && (await deps.teams.removeMember(tx, tenantId, id, userId))) {
        await audit.record(tx, { ...ctx, tenantId }, { action: 'team.member_remove', target: `team:${id}`, details: { name: next.displayName, userId, via: 'scim' } });
      }
    }
    return id;
  }

  const groupState = (t: TeamForScim): ScimGroupState => ({ displayName: t.name, externalId: t.scimExternalId, members: t.members.map((m) => m.userId) });

  return {
    /**
     * Creates the tenant's SCIM token of this name, replacing one of the same name (a rotation, and the
     * way to renew one): shown once, expiring after `expiresInDays` (default 180, at most the tenant's
     * tokens.scimMaxDays). Owners only (admin.manage_tenant), signed in or the operator: a SCIM token
     * provisions and deprovisions every non-owner of the tenant, so an admin minting one would outgrow
     * their role, and a personal access token (or an agent, or a chat gateway) never mints one, as it
     * never mints personal tokens (a leaked token must not mint longer-lived ones).
     */
    async createToken(ctx: Ctx, input: { name?: string; expiresInDays?: number }) {
      if (ctx.actor.kind === 'user' && (ctx.actor.via === 'pat' || ctx.actor.via === 'agent' || ctx.actor.via === 'gateway')) {
        throw new ForbiddenError('SCIM tokens are created by a signed-in owner, or the operator: not with a token', {
          code: 'token_cannot_create_tokens',
          hint: 'Sign in to the dashboard as an owner, or use `npx aws scim token create`.',
        });
      }
      const tenantId = requirePermission(ctx, 'admin.manage_tenant');
      const name = input.name ?? 'default';
      if (!SCIM_TOKEN_NAME.test(name)) throw new ValidationError('name must be lower-case letters, digits, dot, dash or underscore (at most 63)', { details: { field: 'name' } });
      const tenant = await deps.tenants.findById(db, tenantId);
      const days = scimTokenDays(input.expiresInDays, scimMaxDaysOf(tenant?.settings ?? {}));
      const now = clock.now();
      const expiresAt = new Date(now.getTime() + Math.round(days * DAY_MS));
      const token = newScimToken();
      const createdBy = actorString(ctx.actor);
      return db.transaction(async (tx) => {
        const row = await repo.upsertToken(tx, { tenantId, name, hash: scimTokenHash(token), createdBy, createdAt: now, expiresAt });
        await audit.record(tx, { ...ctx, tenantId }, {
          action: row.replaced ? 'scim.token_rotate' : 'scim.token_create',
          target: `scim_token:${row.id}`,
          details: { name, expiresAt: expiresAt.toISOString(), createdBy },
        });
        return { id: row.id, name: row.name, createdBy: row.createdBy, createdAt: row.createdAt, expiresAt: row.expiresAt, replaced: row.replaced, token };
      });
    },

    /** The tenant's SCIM tokens, without their secrets, with whether each has expired (admin.manage_users). */
    async listTokens(ctx: Ctx) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const now = clock.now();
      return (await repo.listTokens(db, tenantId)).map((t) => ({ ...t, expired: t.expiresAt <= now }));
    },

    /**
     * Revokes the named SCIM token, or all of the tenant's; 404 when there was none. Any admin
     * (admin.manage_users), not only owners: revoking only takes access away, and whoever notices a
     * leaked token should be able to cut it off.
     */
    async revokeToken(ctx: Ctx, input: { name?: string | null }) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      return db.transaction(async (tx) => {
        const revoked = await repo.deleteTokens(tx, tenantId, input.name ?? null);
        if (!revoked.length) throw new NotFoundError(input.name ? `no SCIM token named "${input.name}"` : 'the tenant has no SCIM token');
        await audit.record(tx, { ...ctx, tenantId }, { action: 'scim.token_revoke', target: `tenant:${tenantId}`, details: { names: revoked } });
        return { revoked };
      });
    },

    /** The tenant a SCIM bearer token belongs to; 401 for anything else. */
    async authenticate(bearer: string | undefined): Promise<{ tenantId: string; tokenName: string }> {
      const refuse = () => new UnauthenticatedError('a valid SCIM token is required', { hint: 'Send Authorization: Bearer <the tenant\'s SCIM token> (`aws scim token create`).' });
      if (!bearer || !looksLikeScimToken(bearer)) throw refuse();
      const now = clock.now();
      const row = await repo.useToken(db, scimTokenHash(bearer), now);
      if (!row) throw refuse();
      if (row.expiresAt <= now) {
        throw new UnauthenticatedError(`this SCIM token ("${row.name}") expired at ${row.expiresAt.toISOString()}`, {
          code: 'scim_token_expired',
          hint: `An owner renews it: \`aws scim token create --name ${row.name}\` (a new value to enter in the identity provider).`,
        });
      }
      return { tenantId: row.tenantId, tokenName: row.name };
    },

    /** GET /Users: filtered (Entra's and Okta's `userName eq`, `externalId eq`, …), paged. */
    async listUsers(ctx: Ctx, q: ScimListQuery, base: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const filter = q.filter ? parseFilter(q.filter) : null;
      const page = paging(q);
      const all = (await repo.listUsers(db, tenantId)).filter((u) => !filter || matchesFilter(userFilterable(u), filter));
      return listResponse(all.map((u) => renderUser(u, base)), page);
    },

    async getUser(ctx: Ctx, id: string, base: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      return renderUser(await loadUser(db, tenantId, id), base);
    },

    /** POST /Users: a new user with the default role (as sign-in creates them); 409 uniqueness when userName is taken. */
    async createUser(ctx: Ctx, body: unknown, base: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const state = userFromScim(body);
      const id = await db.transaction(async (tx) => {
        if (await repo.userIdByEmail(tx, tenantId, state.userName, null)) throw uniqueness(`a user with userName ${state.userName} already exists`);
        if (state.externalId && (await repo.userIdByExternalId(tx, tenantId, state.externalId, null))) throw uniqueness(`a user with externalId ${state.externalId} already exists`);
        let user;
        try {
          user = await deps.users.insert(tx, { tenantId, handle: await freeHandle(tx, tenantId, state.userName), email: state.userName, displayName: state.displayName });
        } catch (err) {
          if (isUniqueViolation(err)) throw uniqueness(`a user with userName ${state.userName} already exists`);
          throw err;
        }
        const role = await deps.roles.findByName(tx, tenantId, deps.defaultRole);
        if (role) await deps.assignments.assign(tx, { tenantId, userId: user.id, roleId: role.id, assignedBy: 'system:scim' });
        else ctx.log.warn({ role: deps.defaultRole, tenantId }, 'default role does not exist in the tenant: new user has no role');
        const fresh = (await repo.findUser(tx, tenantId, user.id))!;
        await writeUser(tx, ctx, tenantId, fresh, state, true);
        await audit.record(tx, { ...ctx, tenantId }, {
          action: 'user.scim_create',
          target: `user:${user.id}`,
          details: { email: state.userName, handle: user.handle, roles: role ? [role.name] : [], active: state.active },
        });
        return user.id;
      });
      return renderUser(await loadUser(db, tenantId, id), base);
    },

    /** PUT /Users/{id}: replaces what SCIM sets (attributes left out are cleared, `active` defaults to true). */
    async replaceUser(ctx: Ctx, id: string, body: unknown, base: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const state = userFromScim(body);
      await db.transaction(async (tx) => writeUser(tx, ctx, tenantId, await loadUser(tx, tenantId, id), state, false));
      return renderUser(await loadUser(db, tenantId, id), base);
    },

    /** PATCH /Users/{id}: Entra's and Okta's operations, `active: false` deactivating. */
    async patchUser(ctx: Ctx, id: string, body: unknown, base: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const ops = parsePatch(body);
      await db.transaction(async (tx) => {
        const before = await loadUser(tx, tenantId, id);
        await writeUser(tx, ctx, tenantId, before, applyUserPatch(stateOf(before), ops), false);
      });
      return renderUser(await loadUser(db, tenantId, id), base);
    },

    /**
     * DELETE /Users/{id}: removes the user as `user remove` does (same refusals: operator, last owner,
     * gateway service user), and never an owner (403: owners are managed by owners).
     */
    async deleteUser(ctx: Ctx, id: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const user = await loadUser(db, tenantId, id);
      await deps.usersService.removeUser({ ...ctx, tenantId }, {
        userId: id,
        refuseOwner: `${user.email} is an owner of the tenant: owners are managed by owners, so the identity provider cannot delete them. Another owner can take the owner role away first (\`aws role revoke\`).`,
      });
    },

    /** GET /Groups: filtered (`displayName eq`), paged; members left out with excludedAttributes=members. */
    async listGroups(ctx: Ctx, q: ScimListQuery, base: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const filter = q.filter ? parseFilter(q.filter) : null;
      const page = paging(q);
      const members = !excludesMembers(q.excludedAttributes);
      const all = (await repo.listTeams(db, tenantId)).filter((t) => !filter || matchesFilter(groupFilterable(t), filter));
      return listResponse(all.map((t) => renderGroup(t, base, { members })), page);
    },

    async getGroup(ctx: Ctx, id: string, q: { excludedAttributes?: string }, base: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      return renderGroup(await loadTeam(db, tenantId, id), base, { members: !excludesMembers(q.excludedAttributes) });
    },

    /** POST /Groups: a team with its members; 409 uniqueness when a team has that name (ignoring case). */
    async createGroup(ctx: Ctx, body: unknown, base: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const state = groupFromScim(body);
      const id = await db.transaction((tx) => writeTeam(tx, ctx, tenantId, null, state));
      return renderGroup(await loadTeam(db, tenantId, id), base);
    },

    async replaceGroup(ctx: Ctx, id: string, body: unknown, base: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const state = groupFromScim(body);
      await db.transaction(async (tx) => writeTeam(tx, ctx, tenantId, await loadTeam(tx, tenantId, id), state));
      return renderGroup(await loadTeam(db, tenantId, id), base);
    },

    /** PATCH /Groups/{id}: rename, and members added, removed or replaced. */
    async patchGroup(ctx: Ctx, id: string, body: unknown, base: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const ops = parsePatch(body);
      await db.transaction(async (tx) => {
        const before = await loadTeam(tx, tenantId, id);
        await writeTeam(tx, ctx, tenantId, before, applyGroupPatch(groupState(before), ops));
      });
      return renderGroup(await loadTeam(db, tenantId, id), base);
    },

    async deleteGroup(ctx: Ctx, id: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      await db.transaction(async (tx) => {
        const team = await loadTeam(tx, tenantId, id);
        if (!(await deps.teams.remove(tx, tenantId, id))) throw notFound('Group', id);
        await audit.record(tx, { ...ctx, tenantId }, { action: 'team.delete', target: `team:${id}`, details: { name: team.name, members: team.members.map((m) => m.userId), via: 'scim' } });
      });
    },
  };
}
