import { join } from 'node:path';
import type { Config } from '../config/config.schema.js';
import type { Database } from '../db/database.js';
import { createMigrator } from '../db/migrator.js';
import { systemClock, type Clock } from '../lib/clock.js';
import { createAuditRepo } from './audit/audit.repo.js';
import { createAuditService } from './audit/audit.service.js';
import { createAuthRepo } from './auth/auth.repo.js';
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
import { createSecretBox } from '../lib/secret-box.js';
import { createRuntimeClient, createRuntimeConnector } from './runtime/runtime-client.js';
import { createRuntimeHost } from './runtime/runtime-host.js';
import { createRuntimeRepo } from './runtime/runtime.repo.js';
import { createRuntimeService } from './runtime/runtime.service.js';
import { createSessionStreams } from './sessions/session-stream.js';
import { createSessionsRepo } from './sessions/sessions.repo.js';
import { AGENT_TURN_JOB, ANALYTICS_JOB, createSessionsService } from './sessions/sessions.service.js';
import { createTemplatesService } from './templates/templates.service.js';
import { createGatewaysRepo } from './gateways/gateways.repo.js';
import { createGatewayAccess, createGatewaysService } from './gateways/gateways.service.js';
import { createPairingRepo } from './gateways/pairing.repo.js';
import { createPairingService, GATEWAY_REPLY_JOB, GATEWAY_SEND_JOB, type PairingService } from './gateways/pairing.service.js';
import { createPlatforms } from './gateways/platforms.js';

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
  const usage = createUsageService({ db, clock });
  const { oidc } = config.auth;
  const auth = createAuthService({
    db,
    repo: createAuthRepo(),
    bus,
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
      operatorTenant: config.auth.operatorTenant,
      apiKey: config.secrets.apiKey,
    },
    clock,
  });
  const users = createUsersService({ db, repo: usersRepo, audit, revokeSignIns: auth.revokeUser, operator: () => auth.operator() });
  const system = createSystemService({ db, migrator });

  // The agent runtime (opencode) and what runs on it.
  const box = createSecretBox([config.secrets.encryptionKey, ...config.secrets.previousEncryptionKeys]);
  const runtimeRepo = createRuntimeRepo();
  const runtimeHost = createRuntimeHost({ mode: config.runtime.mode, nice: config.runtime.nice, dataDir: config.dataDir, db, box, repo: runtimeRepo, log: deps.log.child({ part: 'runtime' }) });
  const runtimeClient = createRuntimeClient(
    createRuntimeConnector({ mode: config.runtime.mode, url: config.runtime.url, password: config.runtime.password, db, box, repo: runtimeRepo, dataDir: config.dataDir, managed: () => runtimeHost.managed }),
  );
  const runtime = createRuntimeService({ db, repo: runtimeRepo, audit, box, client: runtimeClient, mode: config.runtime.mode, askTools: config.runtime.askTools, log: deps.log });
  const templates = createTemplatesService({ db, audit, checkModel: runtime.checkModel });
  const permissionsOf = async (tenantId: string, userId: string) => rbac.resolvePermissions(tenantId, await usersRepo.roleNames(db, userId));
  const sessionsRepo = createSessionsRepo();
  const streams = createSessionStreams({
    db,
    bus,
    queue,
    repo: sessionsRepo,
    client: runtimeClient,
    log: deps.log.child({ part: 'session-stream' }),
    permissionsOf,
    // A chat user's turn ended: send the answer back through their gateway (once, see the job).
    // An external runtime that restarted (or came back) has whatever configuration it persisted: give it
    // the recorded one again. (serve configures a managed runtime itself after every restart.)
    onRuntimeReconnect:
      config.runtime.mode === 'external'
        ? () => void runtime.pushConfig().catch((err) => deps.log.warn({ err: (err as Error).message }, 'could not configure the reconnected runtime'))
        : undefined,
    onChatTurnEnd: (tenantId, sessionId, eventId) =>
      void queue.send(GATEWAY_REPLY_JOB, { tenantId, sessionId }, { singletonKey: `reply:${eventId}` }).catch((err) => deps.log.error({ err: (err as Error).message }, 'could not queue a chat reply')),
  });
  const sessions = createSessionsService({
    db,
    repo: sessionsRepo,
    audit,
    queue,
    runtime,
    client: runtimeClient,
    streams,
    usage,
    permissionsOf,
    clock,
    log: deps.log,
    workspaceRoot: join(config.dataDir, 'workspaces'),
    limits: config.prompts,
    demo: { allowAnonymous: config.auth.allowAnonymous, operator: () => auth.operator() },
  });

  /** Queues the worker serves, each a thin adapter over one service method. */
  // Messaging gateways and pairing.
  const platforms = createPlatforms({ botChatApiUrl: config.gateways.botChatApiUrl, teamChatApiUrl: config.gateways.teamChatApiUrl });
  const gatewayAccess = createGatewayAccess(!config.secrets.apiKey);
  const gatewaysRepo = createGatewaysRepo();
  let pairing: PairingService | null = null;
  const gateways = createGatewaysService({ db, repo: gatewaysRepo, users: usersRepo, tenants: tenantsRepo, audit, box, platforms, access: gatewayAccess, onChange: (id) => pairing?.forget(id) });
  pairing = createPairingService({
    db,
    repo: createPairingRepo(),
    gateways: gatewaysRepo,
    sessionsRepo,
    sessions,
    audit,
    bus,
    queue,
    box,
    clock,
    log: deps.log.child({ part: 'gateways' }),
    platforms,
    codeHashKey: config.secrets.encryptionKey,
    access: gatewayAccess,
    loadGateway: gateways.load,
    actorOf: async (tenantId, userId) => {
      const roles = await usersRepo.roleNames(db, userId);
      return { roles, permissions: await rbac.resolvePermissions(tenantId, roles) };
    },
  });
  const pairingService = pairing;

  const jobHandlers: JobHandlers = {
    [PROVISION_WORKSPACE_JOB]: async (ctx, data: { tenantId: string }) => {
      await tenants.provisionWorkspace(ctx, data);
    },
    [AGENT_TURN_JOB]: (ctx, data: { turnId: string }) => sessions.runTurn(ctx, data),
    [ANALYTICS_JOB]: (ctx, data) => sessions.recordAnalytics(ctx, data),
    [GATEWAY_SEND_JOB]: (ctx, data) => pairingService.sendJob(ctx, data),
    [GATEWAY_REPLY_JOB]: (ctx, data) => pairingService.replyJob(ctx, data),
  };

  let runtimeStart: Promise<void> | null = null;
  return {
    db, bus, queue, clock, log: deps.log, config, migrator, audit, auth, rbac, users, usage, tenants, system,
    runtime, runtimeHost, runtimeClient, templates, sessions, streams, gateways, pairing: pairingService, jobHandlers,
    /** Starts what a serving process runs besides HTTP: the runtime (managed mode) and the session streams. */
    startRuntime(): Promise<void> {
      // The host claims the managed runtime synchronously, so the streams wait for it, not for an old endpoint.
      runtimeStart = runtimeHost.start(() => runtime.pushConfig());
      return streams.start().then(() => runtimeStart!);
    },
    /** Stops both; safe while the runtime is still starting (that start then fails quietly). */
    async stopRuntime(): Promise<void> {
      await streams.stop();
      await runtimeHost.stop();
      await runtimeStart?.catch(() => {});
    },
  };
}

export type Core = ReturnType<typeof createCore>;
