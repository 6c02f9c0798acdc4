import type { Config } from '../config/config.schema.js';
import type { Database } from '../db/database.js';
import { createMigrator } from '../db/migrator.js';
import { systemClock, type Clock } from '../lib/clock.js';
import { createAuditRepo } from './audit/audit.repo.js';
import { createAuditService } from './audit/audit.service.js';
import { createAuthRepo } from './auth/auth.repo.js';
import { createAuthService } from './auth/auth.service.js';
import { createPersonalTokensRepo } from './tokens/personal-tokens.repo.js';
import { createPersonalTokensService } from './tokens/personal-tokens.service.js';
import { createGroupSync } from './auth/group-sync.js';
import { createOidcClient } from './auth/oidc-client.js';
import { createTokenService } from './auth/tokens.js';
import type { EventBus } from '../kernel/events.js';
import type { JobQueue, JobQueueStats, JobRecovery } from './jobs/job-queue.js';
import type { Logger } from '../kernel/logger.js';
import { createRbacService } from './rbac/rbac.service.js';
import { createSystemService } from './system/system.service.js';
import { createTenantsRepo } from './tenants/tenants.repo.js';
import { createTenantsService } from './tenants/tenants.service.js';
import { createUsageService } from './usage/usage.service.js';
import { createUsageRepo } from './usage/usage.repo.js';
import { createSpendingRepo } from './usage/spending.repo.js';
import { createSpendingService } from './usage/spending.service.js';
import { createUsersRepo } from './users/users.repo.js';
import { createRoleAssignmentsRepo } from './rbac/role-assignments.repo.js';
import { createRolesRepo } from './rbac/roles.repo.js';
import { createUsersService } from './users/users.service.js';
import { createActiveUsers } from './auth/active-users.js';
import { createPersonStop } from './sessions/person-stop.js';
import { createSecretBox } from '../lib/secret-box.js';
import { createAgentEgress } from './egress/agent-egress.js';
import { createRuntimeLauncher, type RuntimeLauncher } from './runtime/host/runtime-launcher.js';
import { runtimeCapacity } from './runtime/host/runtime-capacity.js';
import { readHostMemory, readSwap } from '../lib/host-memory.js';
import { createTerminalService } from './terminal/terminal.service.js';
import { createRuntimePool, runnerToolCallOrigin, type RuntimeRecords } from './runtime/runtime-pool.js';
import { createRuntimeLimits, type RunnerLimitsReport } from './runtime/runtime-limits.js';
import { gatewayCredential, tenantSharedDir, type RuntimeOwner } from './runtime/host/runtime-host.js';
import { createRuntimeRepo } from './runtime/runtime.repo.js';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { createRunnerFleet } from './runners/runner-fleet.js';
import { createWorkspaceFilesService } from './workspace/workspace-files.service.js';
import { relayKey } from './runtime/host/runner-protocol.js';
import { createRunnersRepo } from './runners/runners.repo.js';
import { createRunnersService } from './runners/runners.service.js';
import { runnerOfRow, runnerSocket } from './runtime/runtime-records.js';
import { SANDBOX_PATHS } from './runtime/host/sandbox.js';
import { createDbRuntimeRecords } from './runtime/runtime-records.js';
import { createRuntimeService } from './runtime/runtime.service.js';
import { createProvidersRepo } from './providers/providers.repo.js';
import { createProvidersService } from './providers/providers.service.js';
import { createTurnEvents } from './sessions/turn-events.js';
import { createSessionStreams } from './sessions/session-stream.js';
import { createSessionsRepo } from './sessions/sessions.repo.js';
import { createTurnsRepo } from './sessions/turns.repo.js';
import { createPermissionRequestsRepo } from './sessions/permission-requests.repo.js';
import { createEventLedgerRepo } from './sessions/event-ledger.repo.js';
import { createSessionAnalytics } from './sessions/session-analytics.js';
import { createSessionChanges } from './sessions/session-changes.js';
import { createSessionManage, INDEX_SESSIONS_JOB, indexSessionsKind } from './sessions/session-manage.js';
import { createSessionManageRepo } from './sessions/session-manage.repo.js';
import { createTurnSnapshots } from './sessions/turn-snapshots.js';
import { createSessionSharesRepo } from './sessions/session-shares.repo.js';
import { createSessionSharesService } from './sessions/session-shares.service.js';
import { createSessionsService } from './sessions/sessions.service.js';
import { createTurnRunner } from './sessions/turn-runner.js';
import { createSessionModels } from './sessions/session-models.js';
import { createSessionFork } from './sessions/session-fork.js';
import { processIdentity, processIdentityState } from '../lib/process-state.js';
import { createTemplatesService } from './templates/templates.service.js';
import { createTemplatesRepo } from './templates/templates.repo.js';
import { createGatewaysRepo } from './gateways/gateways.repo.js';
import { createGatewayAccess, createGatewaysService } from './gateways/gateways.service.js';
import { createPairingRepo } from './gateways/pairing.repo.js';
import { createPairingService, GATEWAY_REPLY_JOB, type PairingService } from './gateways/pairing.service.js';
import { createPlatforms } from './gateways/platforms.js';
import { createMemoriesRepo } from './memories/memories.repo.js';
import { createAgentMemoriesService } from './memories/agent-memories.service.js';
import { createMemoriesService } from './memories/memories.service.js';
import { createTeamsRepo } from './teams/teams.repo.js';
import { createGitConnectionsRepo } from './connectors/git-connections.repo.js';
import { createGitConnectionsService } from './connectors/git-connections.service.js';
import { createGitCredentials } from './connectors/git-credentials.js';
import { createGitHostsRepo } from './connectors/git-hosts.repo.js';
import { createCodeHostAdmin } from './codehost/codehost-admin.service.js';
import { createCodeHostAdminRepo } from './codehost/codehost-admin.repo.js';
import { createGitHostsService } from './connectors/git-hosts.service.js';
import { sandboxGitConfig } from './connectors/git-fns.js';
import { createMcpServersRepo } from './connectors/mcp-servers.repo.js';
import { createMcpServersService } from './connectors/mcp-servers.service.js';
import { createTeamsService } from './teams/teams.service.js';
import { createScimRepo } from './scim/scim.repo.js';
import { createScimService } from './scim/scim.service.js';
import { createEmbeddingClient } from './embeddings/embedding-client.js';
import { createEmbeddersRepo } from './embeddings/embedders.repo.js';
import { createEmbeddersService } from './embeddings/embedders.service.js';
import { createEmbeddingsService } from './embeddings/embeddings.service.js';
import { createMemoryIndexer, EMBED_MEMORIES_JOB, embedMemoriesKind } from './memories/memory-indexer.js';
import { createJobsRepo } from './jobs/jobs.repo.js';
import { createJobsService } from './jobs/jobs.service.js';
import { createMetricsService } from './metrics/metrics.service.js';
import { createOrchestratorRepo } from './orchestrator/orchestrator.repo.js';
import { createCodeHostRunsRepo } from './codehost/codehost-runs.repo.js';
import { createCodeHostRuns } from './codehost/codehost-runs.service.js';
import { turnOutcome } from './sessions/session-turns.js';
import { askProvider, createChatClient } from './llm-gateway/chat-client.js';
import { createSkillFiles } from './skills/skill-files.js';
import { createSkillsRepo } from './skills/skills.repo.js';
import { createSkillsService } from './skills/skills.service.js';
import { createBackupRepo } from './backup/backup.repo.js';
import { createBackupService } from './backup/backup.service.js';
import { createPrivacyService } from './privacy/privacy.service.js';
import { createRetentionService } from './retention/retention.service.js';
import { createOrchestratorService } from './orchestrator/orchestrator.service.js';
import { createPromiseCache } from '../lib/promise-cache.js';
import { createCodeHostIntake } from './codehost/codehost-intake.service.js';
import { createCodeHostDeliveriesRepo } from './codehost/codehost-deliveries.repo.js';
import { createJobHandlers } from './job-handlers.js';
import { createRuntimeLifecycle, MODEL_CALLS_CUT_CHANNEL } from './runtime-lifecycle.js';

export interface CoreDeps {
  db: Database;
  bus: EventBus;
  queue: JobQueue & JobQueueStats & JobRecovery;
  log: Logger;
  config: Config;
  clock?: Clock;
}

/** The one composition root: builds every service from its narrow dependencies. */
export function createCore(deps: CoreDeps) {
  const { db, bus, queue, config } = deps;
  const clock = deps.clock ?? systemClock;
  const migrator = createMigrator(db);
  const usersRepo = createUsersRepo();
  const audit = createAuditService({ repo: createAuditRepo(), bus, db, people: usersRepo });
  const tenantsRepo = createTenantsRepo();
  const rolesRepo = createRolesRepo();
  const assignments = createRoleAssignmentsRepo();
  const tenants = createTenantsService({ db, repo: tenantsRepo, users: usersRepo, roles: rolesRepo, assignments, teams: createTeamsRepo(), audit, queue, dataDir: config.dataDir, workspaceQuotaMaxBytes: config.runtime.workspaceQuotaMaxBytes });
  const rbac = createRbacService({ db, roles: rolesRepo, assignments, users: usersRepo, audit, bus, clock });
  const usage = createUsageService({ db, repo: createUsageRepo(), clock });
  const { oidc } = config.auth;
  const personalTokens = createPersonalTokensService({ db, repo: createPersonalTokensRepo(), users: usersRepo, assignments, tenantsRepo, rbac, audit, clock });
  const auth = createAuthService({
    db,
    repo: createAuthRepo(),
    bus,
    tokens: createTokenService({ secret: config.secrets.jwtSecret, issuer: config.server.publicUrl, clock }),
    users: usersRepo,
    tenantsRepo,
    roles: rolesRepo,
    assignments,
    tenants,
    rbac,
    audit,
    groupSync: createGroupSync({ roles: rolesRepo, assignments, teams: createTeamsRepo(), audit }),
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
    personalTokens,
  });
  // Whether a runtime's person is still active: the gateways, turns and plans ask; a removed
  // or deactivated person's agent stops (personStop and the users service, made below once the pool and
  // plans are).
  const activeUsers = createActiveUsers({ load: (tenantId, userId) => usersRepo.isActive(db, tenantId, userId), bus, clock, log: deps.log.child({ part: 'active-users' }) });

  // The agent runtime (opencode) and what runs on it.
  const box = createSecretBox([config.secrets.encryptionKey, ...config.secrets.previousEncryptionKeys]);
  // The tenants' git hosts: the runtimes' git config names them, the git gateway serves them.
  // Their credentials (service tokens, GitHub App installations, people's own connected accounts) are
  // opened and refreshed here only.
  const gitHostsRepo = createGitHostsRepo();
  const gitConnectionsRepo = createGitConnectionsRepo();
  const gitCredentials = createGitCredentials({ db, connections: gitConnectionsRepo, box, clock });
  // A change reaches idle runtimes' git config at once (the runtime is made below; changes only come once the core runs).
  const gitHosts = createGitHostsService({
    db,
    repo: gitHostsRepo,
    connections: gitConnectionsRepo,
    credentials: gitCredentials,
    users: usersRepo,
    assignments,
    teams: createTeamsRepo(),
    audit,
    box,
    changed: (tenantId) => void runtime.refreshIdle(tenantId).catch((err) => deps.log.warn({ err: (err as Error).message }, 'could not refresh runtimes after a git host change')),
  });
  const gitConnections = createGitConnectionsService({ db, hosts: gitHostsRepo, repo: gitConnectionsRepo, credentials: gitCredentials, audit, box, clock, publicUrl: config.server.publicUrl });
  // The tenants' MCP connectors: listed in each runtime by its user's roles, forwarded by the
  // gateway host with their sealed credentials. A change reaches idle runtimes at once (the runtime is
  // made below; changes only come once the core runs), busy ones at their next turn.
  const mcpServers = createMcpServersService({
    db,
    repo: createMcpServersRepo(),
    audit,
    box,
    rolesOf: (userId) => assignments.roleNames(db, userId),
    changed: (tenantId) => void runtime.refreshIdle(tenantId).catch((err) => deps.log.warn({ err: (err as Error).message }, 'could not refresh runtimes after an MCP connector change')),
    log: deps.log.child({ part: 'mcp-servers' }),
  });
  const runtimeRepo = createRuntimeRepo();
  const providersRepo = createProvidersRepo();
  // The provider test calls the provider with the chat client every service-side model call uses.
  const providerChat = createChatClient({ openKey: (sealed) => box.open(sealed) });
  const providers = createProvidersService({ db, repo: providersRepo, audit, box, ask: (p, model, question) => askProvider(providerChat, p, model, question) });
  // How many runtimes this host holds: set, or what its memory holds (runtime-capacity.ts).
  const hostMemory = readHostMemory();
  // Where idle runtimes are paged out to swap, the swap holds more of them (runtime-capacity.ts).
  const capacity = config.runtime.max ?? runtimeCapacity({ ...hostMemory, swapBytes: config.runtime.pageOutAfterMs > 0 && config.runtime.freezeAfterMs > 0 ? readSwap().totalBytes : 0 });
  // What bounds each runtime (memory, processes, /tmp) and each person's workspace quota.
  const runtimeLimits = createRuntimeLimits({
    db, repo: runtimeRepo, tenants: tenantsRepo, config: config.runtime, hostMemoryBytes: hostMemory.totalBytes, audit, log: deps.log.child({ part: 'runtime' }),
    tell: (owner, notice) => turns.limitReached(owner, notice),
  });
  // The promoted skills as files (made before the runtime, which configures every runtime with them).
  const skillsRepo = createSkillsRepo();
  const skillFiles = createSkillFiles({ db, repo: skillsRepo, clock, log: deps.log.child({ part: 'skills' }), tenantDir: (tenantId) => tenantSharedDir(config.dataDir, tenantId) });
  const runtime = createRuntimeService({
    quotaOf: runtimeLimits.quotaOf,
    db,
    repo: runtimeRepo,
    providers: providersRepo,
    audit,
    box,
    credentialKey: config.secrets.encryptionKey,
    dataDir: config.dataDir,
    sandboxed: config.runtime.sandbox,
    maxRuntimes: capacity,
    askTools: config.runtime.askTools,
    log: deps.log,
    bus,
    skills: (tenantId) => skillFiles.materialise(tenantId),
    managers: (tenantId) => assignments.providerManagers(db, tenantId, 5),
    gitConfig: async (tenantId, gatewayHost, credential) => sandboxGitConfig(await gitHosts.sandboxHosts(tenantId), gatewayHost, credential),
    mcpServers: (tenantId, userId) => mcpServers.serversFor(tenantId, userId),
    personOf: async (tenantId, userId) => {
      const u = (await usersRepo.namesOf(db, tenantId, [userId]))[0];
      return u ? { id: u.id, name: u.displayName || u.handle, email: u.email } : null;
    },
    // Set-up complete: the person's runtime starts and prepares now (sessions.prepare checks they may prompt).
    afterApply: (ctx) => sessions.prepare(ctx),
  });
  const permissionsOf = async (tenantId: string, userId: string) => rbac.resolvePermissions(tenantId, await assignments.roleNames(db, userId));
  // This process as what it does is recorded (a turn's send attempt, a model call in flight), so that a
  // process coming back after it died can tell what it left unfinished.
  const host = hostname();
  const self = processIdentity(host);
  const stateOf = (identity: string | null) => processIdentityState(identity, host);
  // Every model call held against its caller's cost limits before it runs, recorded when it ends.
  const spending = createSpendingService({ db, repo: createSpendingRepo(), usage, permissionsOf, clock, holder: self, holderState: stateOf });
  // Long-term memories (before the egress: the agent's memory tools are served on its gateway host).
  // Query vectors come from the tenant's embedder (made below; only called once the core is built).
  const memoriesRepo = createMemoriesRepo();
  const embeddersRepo = createEmbeddersRepo();
  const memoriesDeps = { db, repo: memoriesRepo, embedders: embeddersRepo, audit, queue, embedQuery: (tenantId: string, text: string, userId: string) => embeddings.embedQuery(tenantId, text, { userId }), limits: config.memories };
  const memories = createMemoriesService(memoriesDeps);
  const agentMemories = createAgentMemoriesService({ ...memoriesDeps, log: deps.log.child({ part: 'memories' }), permissionsOf });
  const sessionsRepo = createSessionsRepo();
  const turnsRepo = createTurnsRepo();
  const permissionRequests = createPermissionRequestsRepo();
  // Facts from runtimes' events acted on once across processes (analytics, chat replies, code-host answers).
  const eventLedger = createEventLedgerRepo();
  const sessionSharesRepo = createSessionSharesRepo();
  const egress = createAgentEgress({
    db,
    box,
    audit,
    spending,
    runtimeRepo,
    providers: providersRepo,
    sessionsRepo,
    turnsRepo,
    tenantsRepo,
    permissionsOf,
    memories: agentMemories,
    privateAllow: config.runtime.egressPrivateAllow,
    egressPorts: config.runtime.egressPorts,
    // The orchestrator is made below; model calls only come once runtimes run.
    plans: {
      planSpent: (q, tenantId, planId) => orchestrator.planSpent(q, tenantId, planId),
      spent: (tenantId, sessionId) => orchestrator.spent(tenantId, sessionId),
      refused: (tenantId, planId) => orchestrator.refused(tenantId, planId),
    },
    gitHosts,
    // The session streams are made below; gateways only tell once runtimes run.
    sessionEvents: (sessionId, type, properties) => streams.publish(sessionId, type, properties),
    mcpServers,
    ownerActive: activeUsers.check,
    clock,
    log: deps.log.child({ part: 'egress' }),
  });
  // Runner hosts: the registry of runners, tokens and placements, and this process's side of
  // their channels. Runners are made here, before the pool: the pool places users through the fleet.
  const runners = createRunnersService({ db, repo: createRunnersRepo(), audit, bus, clock, log: deps.log.child({ part: 'runners' }), operator: () => auth.operator(), heartbeatTimeoutMs: config.runtime.runnerHeartbeatTimeoutMs });
  /** This serve's own local runner (registered when it starts hosting, see runtime-lifecycle.ts); null: it hosts none. */
  const localRunnerId = () => lifecycle.localRunnerId();
  const serveId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const credentialCache = createPromiseCache<string | null>({ ttlMs: 5000, max: 50_000 });
  // This serve's own runtimes, as a runner: its host reports are its runner's heartbeats (placement
  // counts them like any runner's).
  const localRunnerRecords = (records: RuntimeRecords): RuntimeRecords => ({
    ...records,
    async report(host, status) {
      await records.report(host, status);
      const runnerId = localRunnerId();
      if (runnerId) await runners.heartbeat(runnerId, { resident: status.resident, busy: status.busy, capacity: status.capacity });
    },
  });
  // The rows of agent_runtimes: what this process's host writes, and how runtimes elsewhere are found.
  const runtimeRecords = localRunnerRecords(
    createDbRuntimeRecords({ db, repo: runtimeRepo, box, dataDir: config.dataDir, lost: (owner, reason, o) => runtimeLost(owner, reason, o), limit: (owner, notice) => runtimeLimits.reached(owner, notice).catch(() => {}) }),
  );
  const fleet = createRunnerFleet({
    registry: runners,
    localRunner: config.runtime.localRunner,
    heartbeatTimeoutMs: config.runtime.runnerHeartbeatTimeoutMs,
    bus,
    log: deps.log.child({ part: 'runners' }),
    relayKey: relayKey(config.secrets.jwtSecret),
    serveId,
    localRunnerId,
    started: async (owner, runnerId, r) => {
      await runtimeRepo.recordRuntime(db, { userId: owner.userId, tenantId: owner.tenantId, hostPid: 0, pid: r.pid, socketPath: runnerSocket(runnerId), passwordSealed: box.seal(r.authorization), sandboxed: true });
      credentialCache.delete(owner.userId);
      await runtime.configureStarted(owner, { endpoint: { tunnel: { runnerId, userId: owner.userId }, authorization: r.authorization }, directory: SANDBOX_PATHS.workspace }, r.pid);
    },
    stopped: async (owner, runnerId, pid, o) => {
      credentialCache.delete(owner.userId);
      await runtimeRepo.forgetRunnerRuntime(db, owner.userId, runnerSocket(runnerId), pid >= 0 ? pid : null);
      await runtimeLost(owner, o?.why ? `on its runner host, ${o.why}` : 'it stopped on its runner host', { idle: o?.idle ?? false, sentBefore: o?.sentBefore });
    },
    runningOn: async (owner, runnerId) => (await runtimeRepo.runtimeOf(db, owner.userId))?.socketPath === runnerSocket(runnerId),
    gateway: (identity, req, res, url) => egress.forRunners.gateway(identity, req, res, url),
    toolCallOrigin: (owner, call) => runnerToolCallOrigin(runtimeRecords, owner, call),
    // The credential of the runtime the runner says it relays for: derived from the runtime's recorded
    // API password, as for a local runtime (a few seconds' cache: one query per model call otherwise).
    credentialOf: (owner) => {
      return credentialCache.get(owner.userId, () =>
        runtimeRepo.runtimeOf(db, owner.userId).then((row) => (row && row.tenantId === owner.tenantId && runnerOfRow(row) ? gatewayCredential(config.secrets.encryptionKey, box.open(row.passwordSealed)) : null)),
      );
    },
    egressRules: (tenantId) => egress.forRunners.rules(tenantId),
    refused: (owner, target) => egress.forRunners.refused(owner, target),
    tenantDir: (tenantId) => tenantSharedDir(config.dataDir, tenantId),
    // Turns are made below; a runner is only declared lost once the core runs.
    runtimeLost: async (owner, reason, o) => void (await turns.runtimeLost(owner, reason, o)),
    quotaOf: runtimeLimits.quotaOf,
    limit: (owner, notice) => runtimeLimits.reached(owner, notice),
    limitsReport: (runner, placed, answer) => runtimeLimits.runnerReport(runner, placed, answer as RunnerLimitsReport),
  });
  // A runtime gone with turns in flight: they end with a clear error (turns are made below).
  const runtimeLost = (owner: RuntimeOwner, reason: string, o?: { idle?: boolean; sentBefore?: Date }): Promise<void> =>
    turns.runtimeLost(owner, reason, o).then(
      () => {},
      (err) => deps.log.error({ err: (err as Error).message }, 'could not end the turns of a lost runtime'),
    );
  let launcher: RuntimeLauncher | null = null;
  const pool = createRuntimePool({
    placement: (owner) => fleet.placement(owner),
    remote: fleet.remote,
    records: runtimeRecords,
    bus,
    log: deps.log.child({ part: 'runtime' }),
    dataDir: config.dataDir,
    max: capacity,
    idleMs: config.runtime.idleMs,
    freezeAfterMs: config.runtime.freezeAfterMs,
    pageOutAfterMs: config.runtime.pageOutAfterMs,
    sandboxed: config.runtime.sandbox,
    credentialKey: config.secrets.encryptionKey,
    launcher: () => (launcher ??= createRuntimeLauncher({ dataDir: config.dataDir, sandbox: config.runtime.sandbox, nice: config.runtime.nice, tmpBytes: config.runtime.tmpBytes, log: deps.log.child({ part: 'runtime' }) })),
    limits: runtimeLimits.host,
    quotaOf: runtimeLimits.quotaOf,
    listen: (identity, at) => egress.listen(identity, at),
    configure: (owner, handle, pid) => runtime.configureStarted(owner, handle, pid),
  });
  const system = createSystemService({
    db,
    migrator,
    agents: () => {
      const sandbox = config.runtime.sandbox ? ('on' as const) : ('off' as const);
      const refusal = pool.refusal;
      if (refusal) return { sandbox, available: false, problem: `${refusal.problem}. ${refusal.hint ?? ''}`.trim() };
      const l = pool.hosting ? pool.limits() : null;
      const limits = l ? { memory: l.memory, processes: l.processes, cpu: l.cpu, disk: l.disk, paging: l.paging, unavailable: l.unavailable } : undefined;
      return { sandbox, available: true, ...(sandbox === 'off' ? { warning: 'agents run unsandboxed (AGENTWS_RUNTIME_SANDBOX=off): single-user trials only' } : {}), ...(limits ? { limits } : {}) };
    },
  });
  const templatesRepo = createTemplatesRepo();
  const templates = createTemplatesService({ db, repo: templatesRepo, audit, checkModel: runtime.checkModel });
  // Learned skills: trajectories of finished turns, proposals written by the tenant's model, promotion.
  const skills = createSkillsService({
    db,
    repo: skillsRepo,
    sessionsRepo,
    turnsRepo,
    tenantsRepo,
    providers: providersRepo,
    runtime,
    pool,
    // Embeddings are made below; only called by jobs.
    embeddings: { embedQuery: (tenantId, text, options) => embeddings.embedQuery(tenantId, text, options) },
    chat: createChatClient({ openKey: (sealed) => box.open(sealed) }),
    usage,
    audit,
    queue,
    clock,
    log: deps.log.child({ part: 'skills' }),
    files: skillFiles,
  });
  // What happens to turns and sessions (turn-events.ts): the sessions capability tells, the plan runner,
  // learned skills and the chat gateways follow (their listeners are below, once they are made).
  const turnEvents = createTurnEvents(deps.log.child({ part: 'turn-events' }));
  const streams = createSessionStreams({
    db,
    bus,
    queue,
    repo: sessionsRepo,
    turnsRepo,
    permissionRequests,
    pool,
    log: deps.log.child({ part: 'session-stream' }),
    permissionsOf,
    events: turnEvents,
  });
  // The service's snapshots of each person's workspace around each turn (what changed, undo and redo).
  const turnSnapshots = createTurnSnapshots({ dataDir: config.dataDir, placement: (owner) => fleet.placement(owner), enabled: config.runtime.snapshots, log: deps.log.child({ part: 'turn-snapshots' }) });
  const turns = createTurnRunner({
    snapshots: turnSnapshots,
    db,
    repo: sessionsRepo,
    turnsRepo,
    runtime,
    pool,
    queue,
    jobs: queue,
    worker: self,
    workerState: stateOf,
    // The calls may be forwarded by any serve (a runner's channel is held by one): each cuts its own.
    cutModelCalls: (owner, before) =>
      void bus.publish(MODEL_CALLS_CUT_CHANNEL, { tenantId: owner.tenantId, userId: owner.userId, before }).catch((err) => deps.log.error({ err: (err as Error).message }, 'could not ask to abort a lost runtime\'s model calls')),
    streams,
    permissionsOf,
    memories: agentMemories,
    events: turnEvents,
    ownerActive: activeUsers.isActive,
    quota: runtimeLimits,
    log: deps.log,
  });
  const sessionAnalytics = createSessionAnalytics({ db, repo: eventLedger, audit, events: turnEvents });
  // Orchestration: plans of subtasks run as turns in child sessions of the user's session.
  const orchestrator = createOrchestratorService({
    db,
    repo: createOrchestratorRepo(),
    sessionsRepo,
    turnsRepo,
    monthSpent: spending.monthSpent,
    audit,
    queue,
    runtime,
    pool,
    streams,
    permissionsOf,
    ownerActive: activeUsers.isActive,
    clock,
    log: deps.log.child({ part: 'orchestrator' }),
  });
  const personStop = createPersonStop({
    sessionsRepo, turnsRepo, streams, events: turnEvents, plans: orchestrator, stopRuntime: (owner) => pool.stopAnywhere(owner), forget: activeUsers.forget, db, log: deps.log.child({ part: 'person-stop' }),
  });
  const terminals = createTerminalService({ db, audit, pool, bus, idleMs: config.runtime.terminalIdleMs, log: deps.log.child({ part: 'terminal' }) });
  const users = createUsersService({
    db, repo: usersRepo, assignments, gateways: createGatewaysRepo(), audit, revokeSignIns: auth.revokeUser, operator: () => auth.operator(), removed: personStop.removed,
  });
  const sessions = createSessionsService({
    db,
    repo: sessionsRepo,
    turnsRepo,
    permissionRequests,
    templates: templatesRepo,
    monthSpent: spending.monthSpent,
    audit,
    queue,
    runtime,
    pool,
    streams,
    clock,
    ensureWorkspace: turns.ensureWorkspace,
    dataDir: config.dataDir,
    limits: config.prompts,
    demo: { allowAnonymous: config.auth.allowAnonymous, operator: () => auth.operator() },
    events: turnEvents,
    shares: sessionSharesRepo,
    nameOf: async (tenantId, userId) => {
      const u = userId ? await usersRepo.findById(db, tenantId, userId) : null;
      return u ? `${u.displayName || u.handle} <${u.email}>` : 'a former member';
    },
  });
  const sessionChanges = createSessionChanges({
    db, repo: sessionsRepo, audit, pool, snapshots: turnSnapshots,
    owned: (ctx, id, browserSession) => sessions.owned(ctx, id, browserSession),
    // A viewer reads the changes too; shared as of a moment, those of the turns up to its last prompt then.
    readable: async (ctx, id, browserSession) => {
      const { session, share } = await sessions.readable(ctx, id, browserSession);
      if (share?.mode !== 'as_of_now') return { session, upTo: null };
      const kept = await sessionSharesRepo.transcriptOf(db, session.tenantId, share.shareId);
      return { session, upTo: String(kept.filter((m) => m.info.role === 'user').at(-1)?.info.id ?? '') };
    },
  });
  // The model chosen per session (and the models a person may choose), and branches of sessions.
  const sessionModels = createSessionModels({ db, repo: sessionsRepo, audit, runtime, owned: (ctx, id, browserSession) => sessions.owned(ctx, id, browserSession) });
  const sessionFork = createSessionFork({ db, repo: sessionsRepo, audit, pool, snapshots: turnSnapshots, owned: (ctx, id, browserSession) => sessions.owned(ctx, id, browserSession) });
  // Managing, searching and exporting sessions: the list, rename/pin/archive, the search index.
  const sessionManage = createSessionManage({
    db, repo: createSessionManageRepo(), sessionsRepo, jobsRepo: createJobsRepo(), audit, clock, log: deps.log.child({ part: 'session-manage' }),
    owned: (ctx, id, browserSession) => sessions.owned(ctx, id, browserSession),
    viewer: (ctx, browserSession) => sessions.viewer(ctx, browserSession),
    transcriptOf: (s) => sessions.transcriptOf(s),
    runningTranscriptOf: (s) => sessions.runningTranscriptOf(s),
    changesOf: (ctx, id, browserSession) => sessionChanges.list(ctx, { id, browserSession }),
  });
  // Who follows turns and sessions. A turn ended: its end is recorded, a plan waiting for it moves on (its
  // step job), it is recorded as a trajectory, a chat user's answer goes back through their gateway (once,
  // see the job). A turn failed (given up, or lost with its runtime): the plan moves on, a chat user is told.
  turnEvents.on('turn.ended', ({ session, end }) => turnsRepo.endTurns(db, session.tenantId, session.id, end));
  turnEvents.on('turn.ended', ({ session, eventId }) => orchestrator.turnEnded(session, eventId));
  turnEvents.on('turn.ended', ({ session, eventId }) => skills.turnEnded(session, eventId));
  turnEvents.on('turn.chat_ended', ({ tenantId, sessionId, eventId }) => queue.send(GATEWAY_REPLY_JOB, { tenantId, sessionId }, { singletonKey: `reply:${eventId}` }));
  turnEvents.on('turn.failed', ({ session, turnId }) => orchestrator.turnEnded(session, `failed:${turnId}`));
  // The search index follows each turn's end (the answer, or what a failed turn left), in the background.
  turnEvents.on('turn.ended', ({ session }) => (session.planId ? undefined : sessionManage.turnEnded(session)));
  turnEvents.on('turn.failed', ({ session }) => (session.parentId ? undefined : sessionManage.turnEnded(session)));
  // A turn's end (idle after its answer, stopped, lost, failed): the workspace's snapshot after it, in the background.
  turnEvents.on('turn.ended', ({ session }) =>
    turnSnapshots.after(async () => {
      const s = await sessionsRepo.byId(db, session.tenantId, session.id);
      return s ? { tenantId: s.tenantId, userId: s.ownerId } : null;
    }, session.id));
  turnEvents.on('turn.failed', ({ session: s }) => turnSnapshots.after({ tenantId: s.tenantId, userId: s.ownerId }, s.id));
  turnEvents.on('turn.failed', ({ session: s, turnId }) =>
    s.channel !== 'web' && !s.parentId ? queue.send(GATEWAY_REPLY_JOB, { tenantId: s.tenantId, sessionId: s.id, turnId }, { singletonKey: `reply:turn:${turnId}` }) : undefined,
  );
  turnEvents.on('session.plan_activity', ({ tenantId, sessionId }) => orchestrator.touch(tenantId, sessionId));
  turnEvents.veto((s, turnId) => orchestrator.turnUnwanted(s, turnId));
  // In the cause's transaction: a deleted session's recent turns are discounted, a loaded skill counted.
  turnEvents.on('session.deleting', ({ tx, tenantId, sessionId }) => skills.sessionDeleted(tx, tenantId, sessionId));
  turnEvents.on('session.deleting', ({ tx, tenantId, sessionId }) => sessionManage.dropIndex(tx, tenantId, sessionId));
  turnEvents.on('skill.loaded', ({ tx, ...load }) => skills.skillLoaded(tx, load));

  // Code hosts: an issue or review comment run as a turn of the person's agent, its result a
  // pull request (the commit and push run inside their sandbox); answered on the host, never silently.
  const codeHostRuns = createCodeHostRuns({
    db, repo: createCodeHostRunsRepo(), hosts: gitHostsRepo, credentials: gitCredentials, users: usersRepo,
    actorOf: async (tenantId, userId) => {
      const roles = await assignments.roleNames(db, userId);
      return { roles, permissions: await rbac.resolvePermissions(tenantId, roles) };
    },
    sessions, sessionsRepo, ledger: eventLedger, changes: sessionChanges, runtimeClient: (owner) => pool.client(owner), keepAwake: (userId) => pool.keepAwake(userId),
    outcome: (s, turnId) => turnOutcome({ db, turnsRepo, pool }, s, turnId),
    audit, queue, publicUrl: config.server.publicUrl, askTools: config.runtime.askTools, log: deps.log.child({ part: 'codehost' }),
  });
  turnEvents.on('turn.ended', ({ session, eventId }) => codeHostRuns.turnEnded(session.tenantId, session.id, null, eventId));
  turnEvents.on('turn.failed', ({ session, turnId }) => codeHostRuns.turnEnded(session.tenantId, session.id, turnId, `failed:${turnId}`));

  // Messaging gateways and pairing.
  const platforms = createPlatforms({ botChatApiUrl: config.gateways.botChatApiUrl, teamChatApiUrl: config.gateways.teamChatApiUrl });
  const gatewayAccess = createGatewayAccess(!config.secrets.apiKey);
  const gatewaysRepo = createGatewaysRepo();
  let pairing: PairingService | null = null;
  const gateways = createGatewaysService({ db, repo: gatewaysRepo, users: usersRepo, roles: rolesRepo, assignments, audit, box, platforms, access: gatewayAccess, onChange: (id) => pairing?.forget(id) });
  pairing = createPairingService({
    db,
    repo: createPairingRepo(),
    gateways: gatewaysRepo,
    sessionsRepo,
    turnsRepo,
    ledger: eventLedger,
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
      const roles = await assignments.roleNames(db, userId);
      return { roles, permissions: await rbac.resolvePermissions(tenantId, roles) };
    },
  });
  const pairingService = pairing;

  // Embeddings of memories, and the jobs the API starts (today: the embedding backfill).
  const jobsRepo = createJobsRepo();
  const jobs = createJobsService({ db, repo: jobsRepo, queue, audit, kinds: { [EMBED_MEMORIES_JOB]: embedMemoriesKind(embeddersRepo), [INDEX_SESSIONS_JOB]: indexSessionsKind() } });
  const embeddings = createEmbeddingsService({
    db,
    repo: embeddersRepo,
    providers: providersRepo,
    usage,
    spending,
    client: createEmbeddingClient({ openKey: (sealed) => box.open(sealed) }),
    log: deps.log.child({ part: 'embeddings' }),
  });
  const memoryIndexer = createMemoryIndexer({ db, repo: embeddersRepo, memories: memoriesRepo, embeddings, jobsRepo, queue });
  const embedders = createEmbeddersService({
    db, repo: embeddersRepo, memories: memoriesRepo, providers: providersRepo, audit, embeddings,
    queueBackfill: (tx, ctx, tenantId, limit) => jobs.enqueue(tx, ctx, tenantId, EMBED_MEMORIES_JOB, { limit }, { concurrent: true }),
  });

  // Teams (memories are made above, with the agent's egress).
  const teams = createTeamsService({ db, repo: createTeamsRepo(), users: usersRepo, audit });
  // SCIM provisioning of users and teams by the tenant's identity provider.
  const scim = createScimService({
    db, repo: createScimRepo(), users: usersRepo, usersService: users, teams: createTeamsRepo(), roles: rolesRepo, assignments, audit,
    revokeUser: auth.revokeUser, operator: () => auth.operator(), defaultRole: config.auth.defaultRole, tenants: tenantsRepo, deactivated: personStop.deactivated, clock,
  });

  // Code hosts' webhooks. A delivery is verified, recorded once per delivery id, and (in
  // the same transaction) a trigger's run queued for codeHostRuns (B) or its refusal answered and audited.
  const codeHostDeliveriesRepo = createCodeHostDeliveriesRepo();
  const codeHostIntake = createCodeHostIntake({
    db, repo: codeHostDeliveriesRepo, hosts: gitHostsRepo, connections: gitConnectionsRepo, users: usersRepo, assignments, rbac, audit, queue, box, clock,
    log: deps.log.child({ part: 'codehost' }),
  });

  // The admin side of code-host webhooks (URL, secret once, mention/label/repos, deliveries, test).
  const codeHostAdmin = createCodeHostAdmin({ db, repo: createCodeHostAdminRepo(), deliveries: codeHostDeliveriesRepo, audit, box, publicUrl: config.server.publicUrl, intake: codeHostIntake });


  // What /metrics reports beyond the HTTP layer's own counters.
  const metrics = createMetricsService({ db, queue, pool, runtimeUsage: (withinMs) => runtimeRepo.recentUsage(db, withinMs), maxRuntimes: capacity, clock, log: deps.log.child({ part: 'metrics' }) });

  // A person's own workspace files through the API: read and written on the host holding them.
  const workspaceFiles = createWorkspaceFilesService({
    db, audit, log: deps.log.child({ part: 'workspace-files' }), dataDir: config.dataDir,
    placement: (owner) => fleet.placement(owner),
    quotaOf: runtimeLimits.quotaOf,
    usedBytes: async (owner) => (await runtimeRepo.usageOf(db, owner.tenantId, owner.userId))?.diskBytes ?? null,
    uploads: config.uploads,
    startRuntime: (owner) => pool.prestart(owner),
  });
  // Sessions shared read-only and handed over.
  const sessionShares = createSessionSharesService({
    db, repo: sessionSharesRepo, sessionsRepo, users: usersRepo, teams: createTeamsRepo(), audit, streams, sessions, files: workspaceFiles, permissionsOf,
    ensureWorkspace: turns.ensureWorkspace, prestart: (owner) => pool.prestart(owner), dataDir: config.dataDir,
  });
  const backup = createBackupService({ db, repo: createBackupRepo(), migrator, audit, clock, log: deps.log.child({ part: 'backup' }), dataDir: config.dataDir, secrets: config.secrets });
  // A person's data on request: their export and erasure, over the capabilities' own repos.
  const privacy = createPrivacyService({
    db, users: usersRepo, tenants: tenantsRepo, assignments, gateways: gatewaysRepo, teams: createTeamsRepo(), sessions: sessionsRepo, memories: createMemoriesRepo(), skills: createSkillsRepo(),
    gitConnections: gitConnectionsRepo, spending: createSpendingRepo(), auditRepo: createAuditRepo(), audit,
    transcriptOf: (s) => sessions.transcriptOf(s), stopRuntime: (owner) => pool.stopAnywhere(owner), revokeSignIns: auth.revokeUser,
    operator: () => auth.operator(), pseudonymKey: config.secrets.encryptionKey, dataDir: config.dataDir, clock,
  });

  // Retention: the tenants' periods, enforced daily by its job (job-handlers.ts).
  const retention = createRetentionService({
    db,
    tenants: tenantsRepo,
    sessionsRepo,
    sessions,
    skills: createSkillsRepo(),
    spending: createSpendingRepo(),
    auditRepo: createAuditRepo(),
    audit,
    clock,
    auditFloorDays: config.retention.auditFloorDays,
  });
  // What the job worker runs, and what is queued on a schedule.
  const { jobHandlers, schedules, recoverJobs } = createJobHandlers({ db, tenants, turns, sessionAnalytics, pairing: pairingService, memoryIndexer, sessionManage, orchestrator, skills, codeHostIntake, retention, codeHostRuns });
  // This process as the runtimes' host: started and stopped by serve.
  const lifecycle = createRuntimeLifecycle({ config, db, bus, log: deps.log, fleet, streams, pool, runners, turns, egress, spending, terminals, capacity, serveId });

  return {
    db, bus, queue, clock, log: deps.log, config, migrator, audit, auth, personalTokens, rbac, users, usage, spending, tenants, system,
    retention,
    codeHostIntake,
    workspaceFiles,
    terminals,
    codeHostRuns,
    runtime, providers, pool, egress, runners, fleet, backup, templates, sessions, sessionChanges, sessionModels, sessionFork, sessionShares, sessionManage, turnSnapshots, streams, turns, gateways, pairing: pairingService, teams, memories, agentMemories, memoryIndexer, embedders, embeddings, jobs, orchestrator, skills, metrics, jobHandlers, schedules, gitHosts, gitConnections, mcpServers, scim, privacy,
    codeHostAdmin,
    recoverJobs,
    drainTurns: lifecycle.drainTurns,
    startRuntime: lifecycle.startRuntime,
    stopRuntime: lifecycle.stopRuntime,
  };
}

export type Core = ReturnType<typeof createCore>;
