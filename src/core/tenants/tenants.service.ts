import { mkdir } from 'node:fs/promises';
import type { Database, Tx } from '../../db/database.js';
import { slugify } from '../../lib/slug.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission, requireSystem } from '../../kernel/authz.js';
import { actorString, type Ctx } from '../../kernel/context.js';
import { ConflictError, NotFoundError, ValidationError } from '../../kernel/errors.js';
import type { JobQueue } from '../jobs/job-queue.js';
import { SYSTEM_ROLE_DESCRIPTIONS, SYSTEM_ROLE_NAMES, systemRolePermissions } from '../../kernel/permissions.js';
import type { UsersRepo, UserRow } from '../users/users.repo.js';
import type { RoleAssignmentsRepo } from '../rbac/role-assignments.repo.js';
import type { RolesRepo } from '../rbac/roles.repo.js';
import { parseSeedTenantInput, type SeedTenantInput } from './tenants.schemas.js';
import type { TenantRow, TenantsRepo } from './tenants.repo.js';
import type { TeamsRepo } from '../teams/teams.repo.js';
import { checkTenantSettings, type MemorySettings, type PrivacySettings, type SignInSettings, type SkillSettings, type TenantSettingsInput } from './tenant-settings-fns.js';
import { tenantWorkspacesDir } from '../../lib/data-paths.js';

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
  roles: RolesRepo;
  assignments: RoleAssignmentsRepo;
  /** Group mapping at sign-in names teams: they must exist when it is saved. */
  teams: TeamsRepo;
  audit: AuditService;
  queue: JobQueue;
  /** The data dir, holding the tenants' workspace directories (the agents' sandboxes). */
  dataDir: string;
  /** The largest workspace quota a tenant may set (AGENTWS_WORKSPACE_QUOTA_MAX). */
  workspaceQuotaMaxBytes?: number;
}) {
  const { db, repo, users, roles, assignments, audit, queue } = deps;

  /** Inserts the tenant (unless its slug exists) and any missing system role; audits and enqueues its set-up. */
  async function createWithRoles(tx: Tx, ctx: Ctx, input: { slug: string; name: string; externalTenantId?: string | null }) {
    const { tenant, created } = await repo.insertIfAbsent(tx, input);
    const newRoles: string[] = [];
    for (const name of SYSTEM_ROLE_NAMES) {
      const inserted = await roles.insertIfAbsent(tx, tenant.id, {
        name,
        description: SYSTEM_ROLE_DESCRIPTIONS[name],
        permissions: systemRolePermissions(name),
        isSystem: true,
      });
      if (inserted) newRoles.push(name);
    }
    if (created) {
      await audit.record(tx, { ...ctx, tenantId: tenant.id }, { action: 'tenant.create', target: `tenant:${tenant.id}`, details: { slug: tenant.slug, name: tenant.name, externalTenantId: tenant.externalTenantId } });
      await queue.send(PROVISION_WORKSPACE_JOB, { tenantId: tenant.id }, { tx, singletonKey: tenant.id });
    }
    return { tenant, created, newRoles };
  }

  async function mapExternalId(tx: Tx, ctx: Ctx, tenant: TenantRow, externalTenantId: string | null) {
    const holder = externalTenantId ? await repo.findByExternalId(tx, externalTenantId) : null;
    if (holder && holder.id !== tenant.id) throw new ConflictError(`external id "${externalTenantId}" is already mapped to tenant ${holder.slug}`);
    await repo.setExternalId(tx, tenant.id, externalTenantId);
    tenant.externalTenantId = externalTenantId;
    await audit.record(tx, ctx, { action: 'tenant.map', target: `tenant:${tenant.id}`, details: { externalTenantId } });
  }

  return {
    /**
     * Creates a tenant with its four system roles and its first owner, or completes an existing one
     * (missing system roles, missing owner). Safe to run again: nothing existing is changed.
     */
    async seedTenant(ctx: Ctx, raw: SeedTenantInput): Promise<SeedTenantResult> {
      requireSystem(ctx, 'creating tenants');
      const input = parseSeedTenantInput(raw);
      return db.transaction(async (tx) => {
        const { tenant, created, newRoles } = await createWithRoles(tx, ctx, { slug: input.slug, name: input.name, externalTenantId: raw.externalTenantId });
        const tctx = { ...ctx, tenantId: tenant.id };
        if (!created && raw.externalTenantId !== undefined && raw.externalTenantId !== tenant.externalTenantId) {
          await mapExternalId(tx, tctx, tenant, raw.externalTenantId);
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
        const ownerRole = (await roles.findByName(tx, tenant.id, 'owner'))!;
        const assigned = await assignments.assign(tx, { tenantId: tenant.id, userId: owner.id, roleId: ownerRole.id, assignedBy: actorString(ctx.actor) });

        if (ownerCreated) {
          await audit.record(tx, tctx, { action: 'user.create', target: `user:${owner.id}`, details: { email: owner.email, handle: owner.handle } });
        }
        if (assigned) {
          await audit.record(tx, tctx, { action: 'role.assign', target: `user:${owner.id}`, details: { role: 'owner', roleId: ownerRole.id } });
        }
        return { tenant, owner, created: { tenant: created, owner: ownerCreated, roles: newRoles } };
      });
    },

    /**
     * Creates the tenant for an organisation seen at sign-in for the first time (only when
     * AGENTWS_AUTO_PROVISION_TENANTS is on). Its first user becomes its owner (see the auth service).
     */
    async provisionForSignIn(ctx: Ctx, input: { externalTenantId: string; name: string }): Promise<{ tenant: TenantRow; created: boolean }> {
      requireSystem(ctx, 'provisioning tenants');
      const base = slugify(input.name) || 'tenant';
      return db.transaction(async (tx) => {
        // Two first sign-ins from one organisation at once: the unique external id lets only one win.
        await repo.lockExternalId(tx, input.externalTenantId);
        const existing = await repo.findByExternalId(tx, input.externalTenantId);
        if (existing) return { tenant: existing, created: false };
        let slug = base;
        for (let i = 2; await repo.findBySlug(tx, slug); i++) slug = `${base.slice(0, 58)}-${i}`;
        const { tenant } = await createWithRoles(tx, ctx, { slug, name: input.name, externalTenantId: input.externalTenantId });
        return { tenant, created: true };
      });
    },

    /** A tenant by slug or id (operator only: the CLI's --tenant flag). */
    async findTenant(ctx: Ctx, ref: string): Promise<TenantRow> {
      requireSystem(ctx, 'looking up tenants');
      const tenant = await repo.findByRef(db, ref);
      if (!tenant) throw new NotFoundError(`tenant "${ref}" not found`, { hint: 'List tenants with `npx aws tenant list`.' });
      return tenant;
    },

    /**
     * Updates tenant settings (admin.manage_tenant): `groupRoleMapping`, identity-provider group object id
     * -> role name, stored and returned (sign-in applies it only when signIn.applyGroupMapping is on, below); `egress`,
     * the domains, addresses and ranges the tenant's agents may (allow: only these) or may not (deny)
     * reach and the ports they may use besides 80 and 443 (keys left out keep their value); `skills`, the
     * people whose work a learnt skill needs (minUsers) and the hosts a skill may name unflagged; `memory`,
     * whether every memory an agent saves waits for its person's release (agentSavesNeedRelease);
     * `signIn.applyGroupMapping`, whether each sign-in applies groupRoleMapping and `groupTeamMapping`
     * (group -> team name; the teams must exist) from the ID token's groups (default false, as SPEC.md).
     */
    async updateSettings(ctx: Ctx, input: { settings: TenantSettingsInput }) {
      const tenantId = requirePermission(ctx, 'admin.manage_tenant');
      const maxMb = Math.floor((deps.workspaceQuotaMaxBytes ?? 100 * 1024 ** 3) / 1024 ** 2);
      const { quotaMb, egress: egressRules, skills: skillRules, memory, privacy, tokens: tokenRules, signIn } = checkTenantSettings(input.settings, maxMb);
      const mapping = input.settings?.groupRoleMapping;
      const teamMapping = input.settings?.groupTeamMapping;
      return db.transaction(async (tx) => {
        const tenant = await repo.findById(tx, tenantId);
        if (!tenant) throw new NotFoundError('tenant not found');
        const settings = { ...tenant.settings };
        if (mapping !== undefined) {
          const names = new Set((await roles.list(tx, tenantId)).map((r) => r.name));
          const unknown = Object.entries(mapping).filter(([, role]) => !names.has(role));
          if (unknown.length) {
            throw new ValidationError(`settings.groupRoleMapping names unknown roles: ${unknown.map(([g, r]) => `${g} -> ${r}`).join(', ')}`, {
              details: { field: 'settings.groupRoleMapping' },
            });
          }
          settings.groupRoleMapping = mapping;
        }
        if (teamMapping !== undefined) {
          const canonical: Record<string, string> = {};
          const unknown: string[] = [];
          for (const [group, name] of Object.entries(teamMapping)) {
            const team = await deps.teams.findByName(tx, tenantId, name.trim());
            if (team) canonical[group] = team.name;
            else unknown.push(`${group} -> ${name}`);
          }
          if (unknown.length) {
            throw new ValidationError(`settings.groupTeamMapping names unknown teams: ${unknown.join(', ')}`, { details: { field: 'settings.groupTeamMapping' }, hint: 'Create them first (`npx aws team create <name>`).' });
          }
          settings.groupTeamMapping = canonical;
        }
        // Read at each sign-in (auth.service.ts completeLogin); keys left out keep their value.
        if (signIn?.applyGroupMapping !== undefined) settings.signIn = { ...(settings.signIn as SignInSettings | undefined), applyGroupMapping: signIn.applyGroupMapping };
        // The egress proxy reads them on every connection: a change applies to running agents at once.
        if (egressRules) settings.egress = { allow: [], deny: [], ports: [], ...(settings.egress as object | undefined), ...egressRules };
        // Read by the learning loop at each detection and proposal; keys left out keep their value.
        if (skillRules) settings.skills = { ...(settings.skills as SkillSettings | undefined), ...skillRules };
        // Read by every agent save (memories.service.ts saveFromAgent); keys left out keep their value.
        if (memory?.agentSavesNeedRelease !== undefined) settings.memory = { ...(settings.memory as MemorySettings | undefined), agentSavesNeedRelease: memory.agentSavesNeedRelease };
        if (privacy) settings.privacy = { ...(settings.privacy as PrivacySettings | undefined), ...privacy };
        // Read when a personal access token is created (personal-tokens.service.ts); existing tokens keep their expiry.
        if (tokenRules?.maxDays !== undefined) settings.tokens = { ...(settings.tokens as object | undefined), maxDays: tokenRules.maxDays };
        // Read when a SCIM token is created or renewed (scim.service.ts); existing ones keep their expiry.
        if (tokenRules?.scimMaxDays !== undefined) settings.tokens = { ...(settings.tokens as object | undefined), scimMaxDays: tokenRules.scimMaxDays };
        // Read at each runtime start and workspace measure (runtime-limits.ts quotaOf, cached 5 s).
        if (quotaMb !== undefined) settings.workspace = { ...(settings.workspace as object | undefined), quotaMb };
        const updated = await repo.updateSettings(tx, tenantId, settings);
        await audit.record(tx, { ...ctx, tenantId }, { action: 'tenant.update', target: `tenant:${tenantId}`, details: { settings } });
        return updated;
      });
    },

    /** The caller's tenant with its settings (admin.manage_tenant: the settings it may change). */
    async getTenant(ctx: Ctx): Promise<TenantRow> {
      const tenantId = requirePermission(ctx, 'admin.manage_tenant');
      const tenant = await repo.findById(db, tenantId);
      if (!tenant) throw new NotFoundError('tenant not found');
      return tenant;
    },

    /** All tenants of the appliance with their user counts (operator only). */
    async listTenants(ctx: Ctx) {
      requireSystem(ctx, 'listing tenants');
      return repo.list(db);
    },

    /** Creates the tenant's workspace directory (run by the worker after the tenant commits). */
    async provisionWorkspace(ctx: Ctx, input: { tenantId: string }): Promise<string> {
      requireSystem(ctx, 'provisioning workspaces');
      const tenant = await repo.findById(db, input.tenantId);
      if (!tenant) throw new NotFoundError(`tenant ${input.tenantId} not found`);
      const dir = tenantWorkspacesDir(deps.dataDir, tenant.id);
      await mkdir(dir, { recursive: true, mode: 0o700 });
      ctx.log.info({ tenantId: tenant.id, dir }, 'tenant workspace ready');
      return dir;
    },
  };
}

export type TenantsService = ReturnType<typeof createTenantsService>;
