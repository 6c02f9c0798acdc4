import type { Database } from '../../db/database.js';
import { requirePermission } from '../authz.js';
import type { Ctx } from '../context.js';
import { NotFoundError } from '../errors.js';
import type { UsersRepo } from './users.repo.js';

export function createUsersService(deps: { db: Database; repo: UsersRepo }) {
  const { db, repo } = deps;
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
  };
}

export type UsersService = ReturnType<typeof createUsersService>;
