import { join } from 'node:path';
import type { Config } from '../config/config.schema.js';
import type { Database } from '../db/database.js';
import { createMigrator } from '../db/migrator.js';
import { systemClock, type Clock } from '../lib/clock.js';
import { createAuditRepo } from './audit/audit.repo.js';
import { createAuditService } from './audit/audit.service.js';
import { createAuthService } from './auth/auth.service.js';
import { createOidcClient } from './auth/oidc-client.js';
import { createTokenService } from './auth/tokens.js';
import type { EventBus } from './events.js';
import type { JobHandlers, JobQueue } from './jobs/job-queue.js';
import type { Logger } from './logger.js';
import { createRbacService } from './rbac/rbac.service.js';
import { createSystemService } from './system/system.service.js';
import { createTenantsRepo } from './tenants/tenants.repo.js';
import { createTenantsService, PROVISION_WORKSPACE_JOB } from './tenants/tenants.service.js';
import { createUsageService } from './usage/usage.service.js';
import { createUsersRepo } from './users/users.repo.js';
import { createUsersService } from './users/users.service.js';

export interface CoreDeps {
  db: Database;
  bus: EventBus;
  queue: JobQueue;
  log: Logger;
  config: Config;
  clock?: Clock;
}

/** The one composition root: builds every service from its narrow dependencies. */
export function createCore(deps: CoreDeps) {
  const { db, bus, queue, config } = deps;
  const clock = deps.clock ?? systemClock;
  const migrator = createMigrator(db);
  const audit = createAuditService({ repo: createAuditRepo(), bus, db });
  const usersRepo = createUsersRepo();
  const tenantsRepo = createTenantsRepo();
  const tenants = createTenantsService({ db, repo: tenantsRepo, users: usersRepo, audit, queue, workspaceRoot: join(config.dataDir, 'workspaces') });
  const rbac = createRbacService({ db, tenants: tenantsRepo, users: usersRepo, audit, bus, clock });
  const users = createUsersService({ db, repo: usersRepo });
  const usage = createUsageService({ db, clock });
  const { oidc } = config.auth;
  const auth = createAuthService({
    db,
    tokens: createTokenService({ secret: config.secrets.jwtSecret, issuer: config.server.publicUrl, clock }),
    users: usersRepo,
    tenantsRepo,
    tenants,
    rbac,
    audit,
    oidc:
      oidc.issuerUrl && oidc.clientId
        ? createOidcClient({ issuerUrl: oidc.issuerUrl, clientId: oidc.clientId, clientSecret: oidc.clientSecret, redirectUri: `${config.server.publicUrl}/v1/auth/callback` })
        : null,
    settings: {
      publicUrl: config.server.publicUrl,
      redirectOrigins: config.auth.redirectOrigins,
      defaultRole: config.auth.defaultRole,
      autoProvisionTenants: config.auth.autoProvisionTenants,
      tenantClaim: oidc.tenantClaim,
      allowAnonymous: config.auth.allowAnonymous,
      operatorEmail: config.auth.operatorEmail,
      apiKey: config.secrets.apiKey,
    },
    clock,
  });
  const system = createSystemService({ db, migrator });

  /** Queues the worker serves, each a thin adapter over one service method. */
  const jobHandlers: JobHandlers = {
    [PROVISION_WORKSPACE_JOB]: async (ctx, data: { tenantId: string }) => {
      await tenants.provisionWorkspace(ctx, data);
    },
  };

  return { db, bus, queue, clock, log: deps.log, config, migrator, audit, auth, rbac, users, usage, tenants, system, jobHandlers };
}

export type Core = ReturnType<typeof createCore>;
