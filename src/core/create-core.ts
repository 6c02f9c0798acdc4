import { join } from 'node:path';
import type { Database } from '../db/database.js';
import { createMigrator } from '../db/migrator.js';
import { systemClock, type Clock } from '../lib/clock.js';
import { createAuditRepo } from './audit/audit.repo.js';
import { createAuditService } from './audit/audit.service.js';
import type { EventBus } from './events.js';
import type { JobHandlers, JobQueue } from './jobs/job-queue.js';
import type { Logger } from './logger.js';
import { createSystemService } from './system/system.service.js';
import { createTenantsRepo } from './tenants/tenants.repo.js';
import { createTenantsService, PROVISION_WORKSPACE_JOB } from './tenants/tenants.service.js';
import { createUsersRepo } from './users/users.repo.js';

export interface CoreDeps {
  db: Database;
  bus: EventBus;
  queue: JobQueue;
  log: Logger;
  dataDir: string;
  clock?: Clock;
}

/** The one composition root: builds every service from its narrow dependencies. */
export function createCore(deps: CoreDeps) {
  const { db, bus, queue } = deps;
  const clock = deps.clock ?? systemClock;
  const migrator = createMigrator(db);
  const audit = createAuditService({ repo: createAuditRepo(), bus });
  const users = createUsersRepo();
  const tenants = createTenantsService({
    db,
    repo: createTenantsRepo(),
    users,
    audit,
    queue,
    workspaceRoot: join(deps.dataDir, 'workspaces'),
  });
  const system = createSystemService({ db, migrator });

  /** Queues the worker serves, each a thin adapter over one service method. */
  const jobHandlers: JobHandlers = {
    [PROVISION_WORKSPACE_JOB]: async (ctx, data: { tenantId: string }) => {
      await tenants.provisionWorkspace(ctx, data);
    },
  };

  return { db, bus, queue, clock, log: deps.log, migrator, audit, tenants, system, jobHandlers };
}

export type Core = ReturnType<typeof createCore>;
