import type { Database, Queryable, Tx } from '../../db/database.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { ConflictError, ForbiddenError, NotFoundError } from '../../kernel/errors.js';
import type { RoleAssignmentsRepo } from '../rbac/role-assignments.repo.js';
import type { UsersRepo } from './users.repo.js';

export function createUsersService(deps: {
  db: Database;
  repo: UsersRepo;
  assignments: RoleAssignmentsRepo;
  /**
   * A gateway's service user is not removed while the gateway acts as it: the ids of the gateways that
   * act as a user (gateways.repo.ts servedBy; described here, as gateways import the users' repo).
   */
  gateways: { servedBy(q: Queryable, tenantId: string, userId: string): Promise<string[]> };
  audit: AuditService;
  /** Ends every sign-in of a user in the removing transaction (auth.revokeUser). */
  revokeSignIns: (tx: Tx, input: { tenantId: string; userId: string }) => Promise<void>;
  /** The operator user, whom demo mode and the service API key act as. */
  operator: () => Promise<{ tenantId: string; userId: string } | null>;
  /** In the removing transaction: the person's runtime is stopped once it commits (sessions/person-stop.ts). */
  removed?: (tx: Tx, owner: { tenantId: string; userId: string }) => void;
}) {
  const { db, repo, assignments, audit } = deps;
  return {
    /** Every user of the caller's tenant with their role names (admin.manage_users). */
    async listUsers(ctx: Ctx) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      return repo.list(db, tenantId);
    },
    /** Finds a user of the caller's tenant by id, email or handle (admin.manage_users). */
    async findUser(ctx: Ctx, ref: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const user = await repo.findByRef(db, tenantId, ref);
      if (!user) throw new NotFoundError(`user "${ref}" not found`);
      return user;
    },

    /**
     * Removes a user of the caller's tenant (admin.manage_users) with their roles, sign-ins and agent
     * sessions (the runtime keeps transcripts); every token of theirs stops working at commit, in every
     * process, and their runtime is stopped. Nobody removes themselves; only owners remove owners; the tenant keeps an owner; the
     * operator user and gateways' service users stay (the API key, demo mode and the gateways act as them).
     * `refuseOwner`: a caller that is no owner though not a user either (SCIM's identity provider) may
     * not remove an owner at all; the reason it is told.
     */
    async removeUser(ctx: Ctx, input: { userId: string; refuseOwner?: string }) {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const operator = await deps.operator();
      return db.transaction(async (tx) => {
        const user = await repo.findById(tx, tenantId, input.userId);
        if (!user) throw new NotFoundError('user not found');
        if (ctx.actor.kind === 'user' && ctx.actor.userId === user.id) throw new ConflictError('you cannot remove yourself', { hint: 'Ask another administrator.' });
        if (operator?.userId === user.id) {
          throw new ConflictError(`${user.email} is the operator user (AGENTWS_OPERATOR_EMAIL): demo mode and the service API key act as them`, {
            hint: 'Configure another operator first.',
          });
        }
        const gateways = await deps.gateways.servedBy(tx, tenantId, user.id);
        if (gateways.length) {
          throw new ConflictError(`this is the service user of gateway ${gateways.join(', ')}`, { hint: 'Delete the gateway instead (`npx aws gateway delete`); its service user goes with it.' });
        }
        const roles = await assignments.roleNames(tx, user.id);
        if (roles.includes('owner')) {
          if (ctx.actor.kind === 'user' && !ctx.actor.roles.includes('owner')) throw new ForbiddenError('only an owner may remove an owner', { details: { permission: 'owner' } });
          // A caller that is no owner though not a user either (SCIM's identity provider): its reason.
          if (input.refuseOwner) throw new ForbiddenError(input.refuseOwner, { code: 'owner_managed_by_owners', details: { permission: 'owner' } });
          // Serialise removals and revocations of owners before counting them (as role revocation does).
          if ((await assignments.lockAndCountOwners(tx, tenantId)) <= 1) throw new ConflictError("cannot remove the tenant's last owner", { hint: 'Make someone else owner first.' });
        }
        await deps.revokeSignIns(tx, { tenantId, userId: user.id });
        await repo.remove(tx, tenantId, user.id);
        deps.removed?.(tx, { tenantId, userId: user.id });
        await audit.record(tx, { ...ctx, tenantId }, { action: 'user.remove', target: `user:${user.id}`, details: { email: user.email, handle: user.handle, roles } });
        return { id: user.id, email: user.email, handle: user.handle, roles };
      });
    },
  };
}

export type UsersService = ReturnType<typeof createUsersService>;
