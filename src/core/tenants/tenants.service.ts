import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Database } from '../../db/database.js';
import type { AuditService } from '../audit/audit.service.js';
import { requireSystem } from '../authz.js';
import { actorString, type Ctx } from '../context.js';
import { ConflictError, NotFoundError } from '../errors.js';
import type { JobQueue } from '../jobs/job-queue.js';
import { SYSTEM_ROLE_DESCRIPTIONS, SYSTEM_ROLE_NAMES, systemRolePermissions } from '../rbac/permissions.js';
import type { UsersRepo, UserRow } from '../users/users.repo.js';
import { parseSeedTenantInput, type SeedTenantInput } from './tenants.schemas.js';
import type { TenantRow, TenantsRepo } from './tenants.repo.js';

export const PROVISION_WORKSPACE_JOB = 'tenant-provision-workspace';

export interface SeedTenantResult {
  tenant: TenantRow;
  owner: UserRow;
  created: { tenant: boolean; owner: boolean; roles: string[] };
}

export function createTenantsService(deps: {
  db: Database;
  repo: TenantsRepo;
  users: UsersRepo;
  audit: AuditService;
  queue: JobQueue;
  /** Root of per-tenant workspace directories (the agents' sandboxes). */
  workspaceRoot: string;
}) {
  const { db, repo, users, audit, queue } = deps;

  return {
    /**
     * Creates a tenant with its four system roles and its first owner, or completes an existing one
     * (missing system roles, missing owner). Safe to run again: nothing existing is changed.
     */
    async seedTenant(ctx: Ctx, raw: SeedTenantInput): Promise<SeedTenantResult> {
      requireSystem(ctx, 'creating tenants');
      const input = parseSeedTenantInput(raw);
      return db.transaction(async (tx) => {
        const { tenant, created } = await repo.insertIfAbsent(tx, { slug: input.slug, name: input.name });
        const tctx = { ...ctx, tenantId: tenant.id };
        const newRoles: string[] = [];
        for (const name of SYSTEM_ROLE_NAMES) {
          const inserted = await repo.insertRoleIfAbsent(tx, tenant.id, {
            name,
            description: SYSTEM_ROLE_DESCRIPTIONS[name],
            permissions: systemRolePermissions(name),
            isSystem: true,
          });
          if (inserted) newRoles.push(name);
        }
        let owner = await users.findByEmail(tx, tenant.id, input.ownerEmail);
        const ownerCreated = !owner;
        if (!owner) {
          if (await users.handleTaken(tx, tenant.id, input.ownerHandle)) {
            throw new ConflictError(`handle "${input.ownerHandle}" is already taken in tenant ${tenant.slug}`, {
              hint: 'Choose another handle with --owner-handle.',
            });
          }
          owner = await users.insert(tx, {
            tenantId: tenant.id,
            handle: input.ownerHandle,
            email: input.ownerEmail,
            displayName: input.ownerDisplayName,
          });
        }
        const ownerRole = (await repo.findRoleByName(tx, tenant.id, 'owner'))!;
        const assigned = await users.assignRole(tx, { tenantId: tenant.id, userId: owner.id, roleId: ownerRole.id, assignedBy: actorString(ctx.actor) });

        if (created) {
          await audit.record(tx, tctx, { action: 'tenant.create', target: `tenant:${tenant.id}`, details: { slug: tenant.slug, name: tenant.name } });
          await queue.send(PROVISION_WORKSPACE_JOB, { tenantId: tenant.id }, { tx, singletonKey: tenant.id });
        }
        if (ownerCreated) {
          await audit.record(tx, tctx, { action: 'user.create', target: `user:${owner.id}`, details: { email: owner.email, handle: owner.handle } });
        }
        if (assigned) {
          await audit.record(tx, tctx, { action: 'role.assign', target: `user:${owner.id}`, details: { role: 'owner', roleId: ownerRole.id } });
        }
        return { tenant, owner, created: { tenant: created, owner: ownerCreated, roles: newRoles } };
      });
    },

    /** All tenants of the appliance with their user counts (operator only). */
    async listTenants(ctx: Ctx) {
      requireSystem(ctx, 'listing tenants');
      return repo.list(db);
    },

    /** A tenant's roles with their permission documents. */
    async listRoles(ctx: Ctx, tenantSlug: string) {
      requireSystem(ctx, 'listing roles of any tenant');
      const tenant = await repo.findBySlug(db, tenantSlug);
      if (!tenant) throw new NotFoundError(`tenant "${tenantSlug}" not found`);
      return repo.listRoles(db, tenant.id);
    },

    /** Creates the tenant's workspace directory (run by the worker after the tenant commits). */
    async provisionWorkspace(ctx: Ctx, input: { tenantId: string }): Promise<string> {
      requireSystem(ctx, 'provisioning workspaces');
      const tenant = await repo.findById(db, input.tenantId);
      if (!tenant) throw new NotFoundError(`tenant ${input.tenantId} not found`);
      const dir = join(deps.workspaceRoot, tenant.id);
      await mkdir(dir, { recursive: true, mode: 0o700 });
      ctx.log.info({ tenantId: tenant.id, dir }, 'tenant workspace ready');
      return dir;
    },
  };
}

export type TenantsService = ReturnType<typeof createTenantsService>;
