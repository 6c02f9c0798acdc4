import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemCtx } from '../../src/kernel/context.js';
import { ConflictError, ForbiddenError, ValidationError } from '../../src/kernel/errors.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { systemRolePermissions } from '../../src/kernel/permissions.js';
import { PROVISION_WORKSPACE_JOB } from '../../src/core/tenants/tenants.service.js';
import { startWorker } from '../../src/jobs/worker.js';
import { openTestCore } from '../helpers/core.js';
import { DB_MODE } from '../helpers/test-env.js';

describe(`tenants (${DB_MODE})`, () => {
  let t: Awaited<ReturnType<typeof openTestCore>>;
  const ctx = systemCtx(silentLogger);
  beforeAll(async () => {
    t = await openTestCore();
  });
  afterAll(() => t?.close());

  const jobsFor = async (tenantId: string) =>
    (await t.opened.db.query(`select state from pgboss.job where name = $1 and data->>'tenantId' = $2`, [PROVISION_WORKSPACE_JOB, tenantId])).rows;

  it('creating a tenant seeds exactly the four system roles with their documents, and the owner', async () => {
    const { core } = t.opened;
    const r = await core.tenants.seedTenant(ctx, { name: 'ACME Corp', ownerEmail: 'Alice@acme.example' });
    expect(r.tenant.slug).toBe('acme-corp');
    expect(r.created).toEqual({ tenant: true, owner: true, roles: ['owner', 'admin', 'member', 'viewer'] });
    expect(r.owner).toMatchObject({ handle: 'alice', email: 'Alice@acme.example' });

    const roles = await core.rbac.listRoles({ ...ctx, tenantId: r.tenant.id });
    expect(roles.map((x) => x.name).sort()).toEqual(['admin', 'member', 'owner', 'viewer']);
    for (const role of roles) {
      expect(role.isSystem).toBe(true);
      expect(role.permissions).toEqual(systemRolePermissions(role.name as never));
    }
    const { rows } = await t.opened.db.query(
      `select r.name from user_roles ur join roles r on r.id = ur.role_id where ur.user_id = $1`,
      [r.owner.id],
    );
    expect(rows).toEqual([{ name: 'owner' }]);

    const audit = await t.opened.db.query(`select action, actor, channel from audit_log where tenant_id = $1 order by ts, action`, [r.tenant.id]);
    expect(audit.rows.map((a) => a.action).sort()).toEqual(['role.assign', 'tenant.create', 'user.create']);
    expect(audit.rows.every((a) => a.actor === 'system:cli' && a.channel === 'cli')).toBe(true);
    expect(await jobsFor(r.tenant.id)).toHaveLength(1);
  });

  it('seeding again is idempotent and matches the owner by email case-insensitively', async () => {
    const { core } = t.opened;
    const r = await core.tenants.seedTenant(ctx, { name: 'ACME Corp', ownerEmail: 'alice@ACME.example' });
    expect(r.created).toEqual({ tenant: false, owner: false, roles: [] });
    expect((await core.rbac.listRoles({ ...ctx, tenantId: r.tenant.id })).length).toBe(4);
    expect(await jobsFor(r.tenant.id)).toHaveLength(1);
    const tenants = await core.tenants.listTenants(ctx);
    expect(tenants.find((x) => x.slug === 'acme-corp')).toMatchObject({ userCount: 1 });
  });

  it('a failed seed leaves nothing behind: no user, no audit entry', async () => {
    const { core, db } = t.opened;
    // Same tenant, a new owner whose handle collides: the whole transaction rolls back.
    await expect(core.tenants.seedTenant(ctx, { name: 'Gamma', ownerEmail: 'g@gamma.example', ownerHandle: 'g' })).resolves.toBeDefined();
    await expect(core.tenants.seedTenant(ctx, { name: 'Gamma', ownerEmail: 'other@gamma.example', ownerHandle: 'g' })).rejects.toBeInstanceOf(ConflictError);
    const users = await db.query(`select count(*)::int as n from users u join tenants t on t.id = u.tenant_id where t.slug = 'gamma'`);
    expect(users.rows[0].n).toBe(1);
    const audits = await db.query(`select count(*)::int as n from audit_log where details->>'email' = 'other@gamma.example'`);
    expect(audits.rows[0].n).toBe(0);
  });

  it('a job sent in a transaction that rolls back never exists', async () => {
    const { core, db } = t.opened;
    const marker = crypto.randomUUID();
    await db
      .transaction(async (tx) => {
        await core.queue.send(PROVISION_WORKSPACE_JOB, { tenantId: marker }, { tx });
        throw new Error('roll back');
      })
      .catch(() => {});
    expect(await jobsFor(marker)).toHaveLength(0);
    await db.transaction((tx) => core.queue.send(PROVISION_WORKSPACE_JOB, { tenantId: marker }, { tx }));
    expect(await jobsFor(marker)).toHaveLength(1);
  });

  it('validates input and is reserved to the operator', async () => {
    const { core } = t.opened;
    await expect(core.tenants.seedTenant(ctx, { name: '  ', ownerEmail: 'nope' })).rejects.toThrow(ValidationError);
    await expect(core.tenants.seedTenant(ctx, { name: '  ', ownerEmail: 'nope' })).rejects.toThrow(/tenant name must not be empty; owner email "nope"/);
    const userCtx = { ...ctx, actor: { kind: 'user' as const, userId: crypto.randomUUID(), tenantId: crypto.randomUUID(), roles: ['owner'], permissions: systemRolePermissions('owner'), via: 'token' as const } };
    await expect(core.tenants.seedTenant(userCtx, { name: 'X', ownerEmail: 'x@x.example' })).rejects.toBeInstanceOf(ForbiddenError);
    await expect(core.tenants.listTenants(userCtx)).rejects.toBeInstanceOf(ForbiddenError);
  });

  it('the worker provisions the tenant workspace from the job enqueued with the tenant', async () => {
    const { core } = t.opened;
    const r = await core.tenants.seedTenant(ctx, { name: 'Delta', ownerEmail: 'd@delta.example' });
    const worker = await startWorker(core, t.opened.boss, silentLogger, { concurrency: 1 });
    try {
      const dir = join(t.env.dataDir, 'workspaces', r.tenant.id);
      const deadline = Date.now() + 15_000;
      while (!existsSync(dir) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));
      expect(existsSync(dir)).toBe(true);
      await expect.poll(async () => (await jobsFor(r.tenant.id))[0]?.state, { timeout: 10_000 }).toBe('completed');
    } finally {
      await worker.stop(2000);
    }
  });
});
