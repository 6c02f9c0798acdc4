import type { Database, Queryable } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import { deepFreeze } from '../../lib/freeze.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission } from '../../kernel/authz.js';
import { actorString, type Ctx } from '../../kernel/context.js';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../../kernel/errors.js';
import type { EventBus } from '../../kernel/events.js';
import { grantsBeyond, unionPermissions, type RbacPermissions } from '../../kernel/permissions.js';
import type { RoleAssignmentsRepo } from './role-assignments.repo.js';
import type { RolesRepo } from './roles.repo.js';

/** Published (after commit) whenever a tenant's roles change, so every process drops its cached documents. */
export const RBAC_CHANGED = 'rbac.changed';
const CACHE_TTL_MS = 30_000;

/**
 * The permission document's schema and its checks, loaded when a role is created or changed: TypeBox
 * costs a command that builds the core some 80 ms to load (serve's routes load it anyway).
 */
const loadSchemas = () => import('./rbac.schemas.js');

/**
 * The people roles are assigned to, as this service needs them: a user of the tenant by id (users.repo.ts),
 * described here so that roles, which the users' repo reads, do not import it back.
 */
export interface RbacUsers {
  findById(q: Queryable, tenantId: string, id: string): Promise<{ id: string } | null>;
}

export function createRbacService(deps: { db: Database; roles: RolesRepo; assignments: RoleAssignmentsRepo; users: RbacUsers; audit: AuditService; bus: EventBus; clock: Clock }) {
  const { db, roles, assignments, users, audit, bus, clock } = deps;
  // Role documents per tenant, kept briefly: resolving permissions is on every authenticated request.
  // Changes invalidate through the bus; the TTL bounds staleness if an event is missed.
  const cache = new Map<string, { at: number; docs: Map<string, RbacPermissions>; unions: Map<string, RbacPermissions> }>();
  let subscribed: Promise<unknown> | null = null;
  const ensureSubscribed = () =>
    (subscribed ??= bus
      .subscribe(RBAC_CHANGED, (p) => {
        const tenantId = (p as { tenantId?: string } | null)?.tenantId;
        if (tenantId) cache.delete(tenantId);
        else cache.clear();
      })
      .catch(() => {
        subscribed = null;
      }));

  const roleDocs = async (tenantId: string, q: Queryable) => {
    void ensureSubscribed();
    const hit = cache.get(tenantId);
    if (hit && clock.now().getTime() - hit.at < CACHE_TTL_MS) return hit;
    const rows = await roles.list(q, tenantId);
    const entry = { at: clock.now().getTime(), docs: new Map(rows.map((r) => [r.name, r.permissions])), unions: new Map<string, RbacPermissions>() };
    cache.set(tenantId, entry);
    return entry;
  };

  // The same few role combinations recur on every request: combine each once per cache period.
  const unionOf = ({ docs, unions }: { docs: Map<string, RbacPermissions>; unions: Map<string, RbacPermissions> }, roleNames: string[]) => {
    const key = roleNames.length === 1 ? roleNames[0] : [...roleNames].sort().join('\n');
    let union = unions.get(key);
    if (!union) {
      union = deepFreeze(unionPermissions(roleNames.map((n) => docs.get(n)).filter((d): d is RbacPermissions => Boolean(d))));
      unions.set(key, union);
    }
    return union;
  };

  /**
   * A tenant's roles changed: this process forgets its documents as soon as the change commits (the bus
   * reaches the others; on PostgreSQL its notification arrives a moment later, and a role used by the
   * very next request, created here, was missing from the cache until then), every other process by the bus.
   */
  const changed = (tx: Parameters<AuditService['record']>[0], tenantId: string) => {
    tx.afterCommit(() => cache.delete(tenantId));
    return bus.publish(RBAC_CHANGED, { tenantId }, tx);
  };

  /**
   * Nobody grants what they do not hold: a user may create or assign a role only when its document is
   * within their own effective permissions. The operator (CLI, system actor) holds everything.
   */
  function checkGrant(ctx: Ctx, doc: RbacPermissions, what: string): void {
    if (ctx.actor.kind !== 'user') return;
    const over = grantsBeyond(doc, ctx.actor.permissions);
    if (over.length) {
      throw new ForbiddenError(`you cannot ${what}: it grants permissions you do not hold (${over.join(', ')})`, { details: { permission: over[0], exceeds: over } });
    }
  }

  /** Only owners grant or revoke the owner role (the operator may too). */
  function checkOwnerRole(ctx: Ctx, role: { name: string; isSystem: boolean }, what: string): void {
    if (role.isSystem && role.name === 'owner' && ctx.actor.kind === 'user' && !ctx.actor.roles.includes('owner')) {
      throw new ForbiddenError(`only an owner may ${what} the owner role`, { details: { permission: 'owner' } });
    }
  }

  return {
    /** Effective permissions of a set of role names in a tenant (unknown names grant nothing). Pass tx inside a transaction. */
    async resolvePermissions(tenantId: string, roleNames: string[], q: Queryable = db): Promise<RbacPermissions> {
      return unionOf(await roleDocs(tenantId, q), roleNames);
    },

    /** resolvePermissions() without waiting, while the tenant's role documents are cached; else undefined. */
    cachedPermissions(tenantId: string, roleNames: string[], nowMs = clock.now().getTime()): RbacPermissions | undefined {
      const hit = cache.get(tenantId);
      return hit && nowMs - hit.at < CACHE_TTL_MS ? unionOf(hit, roleNames) : undefined;
    },

    /** All roles of the caller's tenant with their documents and member counts (admin.manage_roles). */
    async listRoles(ctx: Ctx) {
      const tenantId = requirePermission(ctx, 'admin.manage_roles');
      return roles.listWithMembers(db, tenantId);
    },

    /** Creates a custom role from a partial permission document (admin.manage_roles). */
    async createRole(ctx: Ctx, input: { name: string; description?: string; permissions: unknown }) {
      const tenantId = requirePermission(ctx, 'admin.manage_roles');
      const { completePermissions, ROLE_NAME } = await loadSchemas();
      const name = input.name?.trim().toLowerCase() ?? '';
      if (!ROLE_NAME.test(name)) throw new ValidationError('role name must be 1-63 lower-case letters, digits, dashes or underscores');
      const permissions = completePermissions(input.permissions ?? {});
      checkGrant(ctx, permissions, `create the role "${name}"`);
      return db.transaction(async (tx) => {
        const created = await roles.insertIfAbsent(tx, tenantId, { name, description: input.description?.trim() ?? '', permissions, isSystem: false });
        if (!created) throw new ConflictError(`a role named "${name}" already exists`);
        const role = (await roles.findByName(tx, tenantId, name))!;
        await audit.record(tx, { ...ctx, tenantId }, { action: 'role.create', target: `role:${role.id}`, details: { name, permissions } });
        await changed(tx, tenantId);
        return role;
      });
    },

    /**
     * Changes a role (admin.manage_roles): each permission group given replaces that group, groups left
     * out keep their value. A system role keeps its document except its cost limits (the four are the
     * same in every tenant, and the last-owner rules rely on `owner` granting everything). As with
     * creating, the new document must be within the editor's own permissions; only owners change `owner`.
     */
    async updateRole(ctx: Ctx, input: { roleId?: string; roleName?: string; description?: string; permissions?: unknown }) {
      const tenantId = requirePermission(ctx, 'admin.manage_roles');
      const { completePermissions } = await loadSchemas();
      return db.transaction(async (tx) => {
        const role = await findRole(tx, tenantId, input);
        checkOwnerRole(ctx, role, 'change');
        const given = (input.permissions ?? {}) as Record<string, unknown>;
        if (typeof given !== 'object' || Array.isArray(given)) throw new ValidationError('permissions: a (partial) permission document', { details: { field: 'permissions' } });
        const permissions = completePermissions({ ...role.permissions, ...given });
        if (role.isSystem) {
          // Stored documents come back from jsonb with their keys reordered: compare them sorted.
          const canonical = (v: unknown): unknown =>
            v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)).map(([k, x]) => [k, canonical(x)])) : v;
          // The terminal may be taken from (or given back to) a system role too: a tenant that wants no
          // shell in its sandboxes turns it off on the member role without making a custom one.
          // So may its model allow-list: limiting the member role's models is the common case.
          // And agents.code_host: a tenant that wants no issue handed to agents turns it off there.
          const fixed = (p: RbacPermissions) => JSON.stringify(canonical({ ...p, agents: { ...p.agents, terminal: null, code_host: null }, cost: null, models: null }));
          if (fixed(permissions) !== fixed(role.permissions) || (input.description !== undefined && input.description.trim() !== role.description)) {
            throw new ValidationError(`the system role "${role.name}" keeps its permissions and description; only its cost limits, agents.terminal, agents.code_host and models can change`, { details: { field: 'permissions' }, hint: 'Create a custom role for other permissions.' });
          }
        }
        checkGrant(ctx, permissions, `change the role "${role.name}"`);
        const description = input.description !== undefined ? input.description.trim() : role.description;
        const updated = (await roles.update(tx, tenantId, role.id, { description, permissions }))!;
        // A change of the model allow-list is named apart: what the audit log's reader looks for.
        const modelsBefore = role.permissions.models?.allowed ?? '*';
        const modelsChanged = JSON.stringify(modelsBefore) !== JSON.stringify(permissions.models.allowed);
        await audit.record(tx, { ...ctx, tenantId }, {
          action: 'role.update',
          target: `role:${role.id}`,
          details: { name: role.name, before: role.permissions, permissions, ...(modelsChanged ? { models: { before: modelsBefore, after: permissions.models.allowed } } : {}) },
        });
        await changed(tx, tenantId);
        return updated;
      });
    },

    /** Assigns a role to a user of the same tenant (admin.manage_roles). Idempotent. */
    async assignRole(ctx: Ctx, input: { userId: string; roleId?: string; roleName?: string }) {
      const tenantId = requirePermission(ctx, 'admin.manage_roles');
      return db.transaction(async (tx) => {
        const user = await users.findById(tx, tenantId, input.userId);
        if (!user) throw new NotFoundError('user not found');
        const role = await findRole(tx, tenantId, input);
        checkOwnerRole(ctx, role, 'grant');
        checkGrant(ctx, role.permissions, `assign the role "${role.name}"`);
        const assigned = await assignments.assign(tx, { tenantId, userId: user.id, roleId: role.id, assignedBy: actorString(ctx.actor) });
        if (assigned) {
          await audit.record(tx, { ...ctx, tenantId }, { action: 'role.assign', target: `user:${user.id}`, details: { role: role.name, roleId: role.id } });
          await changed(tx, tenantId);
        }
        return { user, role: { id: role.id, name: role.name }, assigned, roles: await assignments.roleNames(tx, user.id) };
      });
    },

    /** Removes a role from a user (admin.manage_roles); the tenant's last owner keeps the owner role. */
    async revokeRole(ctx: Ctx, input: { userId: string; roleId?: string; roleName?: string }) {
      const tenantId = requirePermission(ctx, 'admin.manage_roles');
      return db.transaction(async (tx) => {
        const user = await users.findById(tx, tenantId, input.userId);
        if (!user) throw new NotFoundError('user not found');
        const role = await findRole(tx, tenantId, input);
        checkOwnerRole(ctx, role, 'revoke');
        if (role.isSystem && role.name === 'owner') {
          // Serialise concurrent revocations of owners in this tenant before counting them.
          if ((await assignments.lockAndCountOwners(tx, tenantId)) <= 1) throw new ConflictError('cannot remove the owner role from the tenant\'s last owner', { hint: 'Assign the owner role to someone else first.' });
        }
        if (!(await assignments.unassign(tx, { tenantId, userId: user.id, roleId: role.id }))) throw new NotFoundError(`user does not have the role "${role.name}"`);
        await audit.record(tx, { ...ctx, tenantId }, { action: 'role.revoke', target: `user:${user.id}`, details: { role: role.name, roleId: role.id } });
        await changed(tx, tenantId);
        return { user, role: { id: role.id, name: role.name }, roles: await assignments.roleNames(tx, user.id) };
      });
    },
  };

  async function findRole(q: Database | Parameters<AuditService['record']>[0], tenantId: string, input: { roleId?: string; roleName?: string }) {
    const role = input.roleId
      ? (await roles.list(q, tenantId)).find((r) => r.id === input.roleId)
      : input.roleName
        ? await roles.findByName(q, tenantId, input.roleName)
        : null;
    if (!role) throw new NotFoundError('role not found');
    return role;
  }
}

export type RbacService = ReturnType<typeof createRbacService>;
