import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { seedTenant, startTestApp, type TestApp } from '../helpers/app.js';

/**
 * Role documents are cached per tenant (every authenticated request resolves permissions). A change is
 * seen at once by the process that made it: the next request may use the role it just created. Other
 * processes learn of it through the event bus (on PostgreSQL a notification a moment later); before, the
 * process that made the change waited for that notification too, and a role used by the very next
 * request was missing (the role-manager test of identity-hardening failed now and then on it).
 */
describe('role documents: a change is seen at once by the process that made it', () => {
  let t: TestApp;
  let tenantId: string;

  beforeAll(async () => {
    t = await startTestApp();
    tenantId = (await seedTenant(t, 'rbac-cache')).tenantId;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a role created here is in the cache the moment its transaction commits', async () => {
    const { rbac } = t.opened.core;
    const ctx = { ...systemCtx(silentLogger), tenantId };
    // Warm: the tenant's documents cached without the role.
    expect((await rbac.resolvePermissions(tenantId, ['fresh'])).admin.manage_roles).toBe(false);
    for (let i = 0; i < 5; i++) {
      await rbac.createRole(ctx, { name: `fresh-${i}`, permissions: { admin: { manage_roles: true } } });
      // No wait for the bus: what the next request of this process would resolve.
      expect(rbac.cachedPermissions(tenantId, [`fresh-${i}`])?.admin.manage_roles ?? (await rbac.resolvePermissions(tenantId, [`fresh-${i}`])).admin.manage_roles).toBe(true);
    }
  });
});
