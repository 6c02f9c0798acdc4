import type { EventBus } from '../../kernel/events.js';
import { createHash } from 'node:crypto';
import { basename } from 'node:path';
import type { Database } from '../../db/database.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { AuditService } from '../audit/audit.service.js';
import { hasPermission, requirePermission, tenantOf } from '../../kernel/authz.js';
import { actorString, type Ctx } from '../../kernel/context.js';
import { AppError, ConfigError, ValidationError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/logger.js';
import { GATEWAY_HOST, MCP_CONNECTOR_PATH_PREFIX, MEMORY_MCP_PATH, MEMORY_MCP_SERVER } from './host/agent-endpoints.js';
import { createRuntimeClient } from './runtime-client.js';
import type { RuntimeHandle } from './host/runtime-transport.js';
import { RUNTIME_USED_CHANNEL } from './runtime-pool.js';
import { HOST_REPORT_FRESH_MS, gatewayCredential, type RuntimeOwner } from './host/runtime-host.js';
import { nearLimits, overQuota, usageAsOf } from './host/runtime-limits-fns.js';
import { MANAGED_GITCONFIG_KEY, managedConfigDir, runtimeRoot, writeManagedConfig } from './host/managed-config.js';
import { handleOfRow } from './runtime-records.js';
import { ASKABLE_TOOL_NAMES, permissionOfTool } from './runtime-tools.js';
import { SANDBOX_PATHS } from './host/sandbox.js';
import type { AppliedState, RuntimeRepo } from './runtime.repo.js';
import { MODEL_REF } from '../providers/provider-names.js';
import type { ProviderKind, ProviderModel } from '../providers/providers.schemas.js';
import { checkModelRef, modelPrices, publicProvider } from '../providers/providers-fns.js';
import type { ProviderRow, ProvidersRepo } from '../providers/providers.repo.js';
import { checkModelChoice, effectiveModel, modelCatalog, type ModelSource } from '../providers/model-choice-fns.js';
import type { RbacPermissions } from '../../kernel/permissions.js';

/** SPEC.md sessions rule 6: prompting fails closed until a runtime with a provider and model is applied. */
class RuntimeNotReadyError extends AppError {
  // 409: the request conflicts with the workspace's configuration state; retrying will not help until
  // an admin applies a runtime (unlike 503, which invites retries).
  readonly status = 409;
  constructor(detail: string) {
    super(`the agent runtime is not ready: ${detail}`, 'runtime_not_ready', {
      fields: { detail },
      hint: 'An admin registers a provider, picks a default model and applies it: in the dashboard (Admin, Models and runtime), or `npx aws provider add`, then `npx aws runtime apply --default-model <provider>/<model>`.',
    });
  }
}

const NPM: Record<ProviderKind, string> = {
  'openai-compatible': '@ai-sdk/openai-compatible',
  openai: '@ai-sdk/openai',
  anthropic: '@ai-sdk/anthropic',
};

import { runtimeProviderId } from './runtime-ids.js';

export interface ResolvedModel {
  providerID: string;
  modelID: string;
  /** As the tenant writes it: "<provider name>/<model id>". */
  ref: string;
}

export function createRuntimeService(deps: {
  db: Database;
  repo: RuntimeRepo;
  /** The tenant's model providers: what the runtime's configuration and the default model are made of. */
  providers: Pick<ProvidersRepo, 'list'>;
  audit: AuditService;
  box: SecretBox;
  /** Key the runtimes' gateway credentials are derived with (see gatewayCredential). */
  credentialKey: string;
  dataDir: string;
  sandboxed: boolean;
  maxRuntimes: number;
  askTools: readonly string[];
  log: Logger;
  /** Tells the process hosting a runtime that it is about to be used (it thaws it if frozen). */
  bus: Pick<EventBus, 'publish'>;
  /**
   * The tenant's promoted skills: the host directory holding them (null: none) and the names agents may
   * load (`allow`) or must not (`deny`: every other skill the tenant ever had).
   */
  skills?: (tenantId: string) => Promise<{ dir: string | null; allow: string[]; deny: string[] }>;
  /** People of the tenant who may set it up (admin.manage_providers): who a member is told to ask. */
  managers?: (tenantId: string) => Promise<Array<{ handle: string; displayName: string; email: string }>>;
  /**
   * The sandbox's git config text for a tenant (empty: none): its git hosts sent to the git gateway on
   * `gatewayHost`, which this runtime's `credential` authenticates to (connectors/git-fns.ts sandboxGitConfig).
   */
  gitConfig?: (tenantId: string, gatewayHost: string, credential: string) => Promise<string>;
  /** The tenant's MCP connectors the user's roles may use (names): listed in the runtime, at the gateway host. */
  mcpServers?: (tenantId: string, userId: string) => Promise<string[]>;
  /** A person's workspace quota (runtime-limits.ts), for status. */
  quotaOf?: (owner: RuntimeOwner) => Promise<number | null>;
  /** A person of the tenant by id, named (who applied the configuration, as the status shows it). */
  personOf?: (tenantId: string, userId: string) => Promise<{ id: string; name: string; email: string } | null>;
  /**
   * Told after an apply by a person who asked for it (`prepare`: the dashboard does, as the set-up
   * completes): their runtime starts and prepares now rather than at their first prompt (best effort; it
   * never fails the apply). Not by default: a script applying for others has no prompt coming.
   */
  afterApply?: (ctx: Ctx) => Promise<unknown>;
}) {
  // A name no tool asks under would silently never ask: refused at start-up, as a configuration problem.
  const unknownAsks = deps.askTools.filter((t) => !permissionOfTool(t));
  if (unknownAsks.length) {
    throw new ConfigError(unknownAsks.map((t) => ({ variable: 'AGENTWS_RUNTIME_ASK_TOOLS', message: `"${t}" is not a runtime tool that can ask (one of ${ASKABLE_TOOL_NAMES.join(', ')})` })));
  }
  const { db, repo, audit, box } = deps;
  /** A runtime found by its row may be frozen: its host thaws it (the request waits in its socket meanwhile). */
  const wake = (row: RuntimeOwner) => deps.bus.publish(RUNTIME_USED_CHANNEL, { userId: row.userId });

  /**
   * The runtime's config entry for one provider: pointed at the LLM gateway (reached through the
   * runtime's egress proxy) with the runtime's own credential. The provider's key never enters it.
   */
  function runtimeEntry(p: ProviderRow, credential: string) {
    return {
      npm: NPM[p.kind],
      name: p.name,
      options: { baseURL: `http://${GATEWAY_HOST}/p/${p.name}`, apiKey: credential },
      models: Object.fromEntries(
        p.models.map((m) => [
          m.id,
          {
            name: m.name ?? m.id,
            limit: { context: m.contextLimit ?? 128_000, output: m.outputLimit ?? 8192 },
            ...runtimeCost(p.kind, m),
          },
        ]),
      ),
    };
  }

  /**
   * A model's prices as the runtime computes each message's cost with them (what the person sees of a
   * turn's cost): the gateway's own (providers-fns.ts modelPrices), cache prices settled. The runtime
   * prices an unset cache price at 0, so they are always written. No prices given: none (no cost).
   */
  function runtimeCost(kind: ProviderKind, m: ProviderModel) {
    if ([m.inputCostPerMTok, m.outputCostPerMTok, m.cacheReadCostPerMTok, m.cacheWriteCostPerMTok].every((x) => x === undefined)) return {};
    const p = modelPrices(kind, m);
    return { cost: { input: p.inputPerMTok, output: p.outputPerMTok, cache_read: p.cacheReadPerMTok, cache_write: p.cacheWritePerMTok } };
  }

  /** What one user's runtime should run: their tenant's applied, enabled providers, our permission rules. */
  async function desiredConfig(tenantId: string, credential: string, userId?: string) {
    const [providers, settings, skills] = await Promise.all([
      deps.providers.list(db, tenantId),
      repo.settings(db, tenantId),
      deps.skills ? deps.skills(tenantId) : { dir: null, allow: [], deny: [] },
    ]);
    const applied = new Set(settings?.applied?.providers ?? []);
    const active = providers.filter((p) => p.enabled && applied.has(p.name));
    const provider: Record<string, unknown> = Object.fromEntries(active.map((p) => [runtimeProviderId(tenantId, p.name), runtimeEntry(p, credential)]));
    const asks = deps.askTools.map((t) => permissionOfTool(t) ?? t);
    const skillRule = asks.includes('skill') ? 'ask' : 'allow';
    const config = {
      provider,
      enabled_providers: active.map((p) => runtimeProviderId(tenantId, p.name)),
      // No git snapshot of the workspace at every step: the service offers no undo or revert through the
      // runtime, and the snapshot costs every step time and disk (and ~1.5 s at the first turn after a reload).
      snapshot: false,
      permission: {
        // Advice to the model; the sandbox is the boundary.
        external_directory: 'deny',
        ...Object.fromEntries(asks.map((p) => [p, 'ask'])),
        // Only the tenant's promoted skills load (the last matching rule wins); they ask first when the
        // operator made `skill` ask. Names once allowed are denied by name too.
        skill: {
          '*': 'deny',
          ...Object.fromEntries(skills.deny.map((n) => [n, 'deny'])),
          ...Object.fromEntries(skills.allow.map((n) => [n, skillRule])),
        },
      },
      // Where they are: the tenant's read-only shared directory as the runtime sees it. A promotion
      // names a new directory, so the configuration changes and the runtime reloads its skills.
      skills: { paths: skills.dir ? [deps.sandboxed ? `${SANDBOX_PATHS.tenant}/skills/${basename(skills.dir)}` : skills.dir] : [] },
      // The user's memory tools (memory_search, memory_save): served by the service on the gateway host,
      // reached through the runtime's proxy with its own credential like model calls. No OAuth discovery:
      // the credential is the whole authentication.
      mcp: {
        [MEMORY_MCP_SERVER]: {
          type: 'remote',
          url: `http://${GATEWAY_HOST}${MEMORY_MCP_PATH}`,
          headers: { Authorization: `Bearer ${credential}` },
          oauth: false,
          enabled: true,
          timeout: 15_000,
        },
        // The tenant's MCP connectors this user's roles may use: at the gateway host, which checks the
        // roles again on every request and adds the server's credential; neither the server's URL nor its
        // credential is in this file (connectors/mcp-gateway.ts).
        ...Object.fromEntries(
          (deps.mcpServers && userId ? await deps.mcpServers(tenantId, userId) : []).map((name) => [
            name,
            { type: 'remote', url: `http://${GATEWAY_HOST}${MCP_CONNECTOR_PATH_PREFIX}${name}`, headers: { Authorization: `Bearer ${credential}` }, oauth: false, enabled: true, timeout: 60_000 },
          ]),
        ),
      },
      share: 'disabled',
      autoupdate: false,
    };
    // The sandbox's git config, written beside opencode.json (managed-config.ts): the tenant's git hosts
    // rewritten to the git gateway, which adds their credentials (git-fns.ts sandboxGitConfig).
    const gitconfig = deps.gitConfig ? await deps.gitConfig(tenantId, GATEWAY_HOST, credential) : '';
    const withGit = gitconfig ? { ...config, [MANAGED_GITCONFIG_KEY]: gitconfig } : config;
    return { config: withGit, fingerprint: createHash('sha256').update(JSON.stringify(withGit)).digest('hex') };
  }

  /**
   * Brings one user's runtime to what the database records for their tenant: writes its managed
   * configuration (a file of the host's, read-only inside the sandbox: managed-config.ts) whole, and
   * has the runtime reload when it changed. `force`: write even when the runtime's row says it has this
   * configuration already (a fresh start, an apply).
   */
  /** Writes to one runtime in flight, by user: a turn's check waits for a refresh writing the same change. */
  const writing = new Map<string, Promise<boolean>>();
  function configure(owner: RuntimeOwner, handle: RuntimeHandle, pid: number | null, force: boolean): Promise<boolean> {
    const next = (writing.get(owner.userId) ?? Promise.resolve(false)).catch(() => false).then(() => writeConfig(owner, handle, pid, force));
    writing.set(owner.userId, next);
    const done = () => {
      if (writing.get(owner.userId) === next) writing.delete(owner.userId);
    };
    next.then(done, done);
    return next;
  }

  /** Returns whether it wrote (false: the runtime's row says it has this configuration already). */
  async function writeConfig(owner: RuntimeOwner, handle: RuntimeHandle, pid: number | null, force: boolean): Promise<boolean> {
    const client = createRuntimeClient(handle);
    const desired = await desiredConfig(owner.tenantId, gatewayCredential(deps.credentialKey, handle.endpoint.authorization), owner.userId);
    if (!force) {
      const row = await repo.runtimeOf(db, owner.userId);
      if (row?.configFingerprint === desired.fingerprint) return false;
      pid = row?.pid ?? pid;
    }
    // The runtime reads the file afresh when it builds a workspace's instance (at its first request after
    // a start or a reload): the reload drops the instances built from the old file, as a configuration
    // change through opencode's own API did. A runtime just started has none yet: nothing is dropped.
    const changed = handle.endpoint.tunnel
      ? await client.writeManagedConfig(desired.config)
      : writeManagedConfig(managedConfigDir(runtimeRoot(deps.dataDir, owner.userId)), desired.config);
    // The file as it was, but not recorded as taken (its writer stopped before the reload): reload too. An
    // apply that changes nothing reloads nothing (a turn in progress goes on).
    if (changed || !force || (await repo.runtimeOf(db, owner.userId))?.configFingerprint !== desired.fingerprint) await client.reload();
    if (pid) await repo.setConfigFingerprint(db, owner.userId, pid, desired.fingerprint);
    return true;
  }

  return {
    /** Writes the tenant's configuration into a user's runtime that just (re)started. */
    configureStarted: async (owner: RuntimeOwner, handle: RuntimeHandle, pid: number): Promise<void> => void (await configure(owner, handle, pid, true)),

    /** Before a turn: brings the runtime up to date if an apply happened since it was configured. */
    ensureConfigured: async (owner: RuntimeOwner, handle: RuntimeHandle): Promise<void> => void (await configure(owner, handle, null, false)),

    /**
     * After a change to what every runtime of the tenant should run (learned skills): each running runtime
     * with no turn in progress takes it now and prepares its workspace again, so the next turn does not
     * wait for the runtime's reload (~1.5 s on an idle host, several times that under load). A runtime
     * in the middle of a turn is left alone (writing its configuration would drop the turn); its next
     * turn takes the change. Best effort.
     */
    async refreshIdle(tenantId: string): Promise<number> {
      let refreshed = 0;
      for (const row of await repo.runtimesOfTenant(db, tenantId)) {
        const handle = handleOfRow(row, box, deps.dataDir);
        const client = createRuntimeClient(handle);
        try {
          await wake(row);
          if ((await client.busySessions()).length) continue;
          if (!(await configure(row, handle, row.pid, false))) continue;
          await client.warmUp();
          refreshed++;
        } catch (err) {
          deps.log.warn({ err: (err as Error).message, userId: row.userId }, 'could not refresh an idle runtime: its next turn will');
        }
      }
      return refreshed;
    },

    /**
     * Applies the tenant's providers and default model (admin.manage_providers): checks them, records
     * them as applied (audited), then brings the runtime to the recorded state. The record comes first,
     * so a runtime that starts or restarts meanwhile gets it either way. `pushed: false` (with
     * `runtimeError`) when the runtime cannot take it now (the managed runtime not running, an external
     * one unreachable or failing): it stays recorded, and serve writes it when it starts the runtime or
     * reconnects to it.
     */
    async apply(ctx: Ctx, input: { defaultModel?: string; prepare?: boolean }) {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      const providers = await deps.providers.list(db, tenantId);
      const settings = await repo.settings(db, tenantId);
      const defaultModel = input.defaultModel ?? settings?.defaultModel ?? null;
      if (!defaultModel) throw new ValidationError('choose a default model first', { hint: 'Name it as "<provider>/<model id>": `npx aws runtime apply --default-model <provider>/<model>`, or defaultModel in the request.' });
      const { provider } = checkModelRef(defaultModel, providers, 'defaultModel');
      if (!provider.enabled) throw new ValidationError(`the default model's provider "${provider.name}" is disabled`);
      const applied: AppliedState = { defaultModel, providers: providers.filter((p) => p.enabled).map((p) => p.name) };
      await db.transaction(async (tx) => {
        await repo.setApplied(tx, tenantId, applied, actorString(ctx.actor));
        await audit.record(tx, ctx, { action: 'runtime.apply', target: `tenant:${tenantId}`, details: { ...applied } });
      });
      // The tenant's running runtimes take it now; the others when they start (and each turn checks).
      const failures: string[] = [];
      for (const row of await repo.runtimesOfTenant(db, tenantId)) {
        await wake(row).catch(() => {});
        await configure(row, handleOfRow(row, box, deps.dataDir), row.pid, true).catch((err) => failures.push((err as Error).message));
      }
      // The workspace can prompt now: the person who set it up is about to, so their runtime starts and
      // prepares meanwhile instead of making the first answer pay the cold start.
      if (input.prepare && ctx.actor.kind === 'user' && deps.afterApply) void deps.afterApply(ctx).catch((err) => ctx.log.debug({ err: (err as Error).message }, 'runtime not started after apply'));
      if (!failures.length) return { applied, pushed: true };
      ctx.log.warn({ err: failures[0], failed: failures.length }, 'runtime configuration recorded but not written to every running runtime');
      return { applied, pushed: false, runtimeError: failures[0] };
    },

    /** Chooses the tenant's default model ("<provider>/<model id>"); it reaches the runtime at the next apply. */
    async setDefaultModel(ctx: Ctx, model: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      checkModelRef(model, await deps.providers.list(db, tenantId), 'defaultModel');
      await db.transaction(async (tx) => {
        await repo.setDefaultModel(tx, tenantId, model);
        await audit.record(tx, ctx, { action: 'runtime.model_set', target: `tenant:${tenantId}`, details: { defaultModel: model } });
      });
    },

    /** What the runtime runs for this tenant and whether prompts can start (admin.manage_providers). */
    async status(ctx: Ctx) {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      const [providers, settings] = await Promise.all([deps.providers.list(db, tenantId), repo.settings(db, tenantId)]);
      const readiness = readinessOf(settings?.applied ?? null, providers);
      const [live, hosts, usage] = await Promise.all([repo.runtimesOfTenant(db, tenantId), repo.liveHosts(db, HOST_REPORT_FRESH_MS), repo.usageOfTenant(db, tenantId)]);
      // The quota of a person of this tenant (the same for each of them: the tenant's setting or the default).
      const quota = deps.quotaOf ? await deps.quotaOf({ tenantId, userId: '' }) : null;
      const runtime = {
        sandbox: deps.sandboxed ? ('on' as const) : ('off' as const),
        ...(deps.sandboxed ? {} : { warning: 'AGENTWS_RUNTIME_SANDBOX=off: agents run unsandboxed, with the service\'s files and network in reach (single-user trials only)' }),
        running: live.length,
        max: hosts[0]?.capacity ?? deps.maxRuntimes,
        // As the hosting process last reported it (every 30 s, or at a change): the whole host, every tenant.
        hosts: hosts.map((h) => ({
          hostname: h.hostname,
          pid: h.hostPid,
          capacity: h.capacity,
          resident: h.resident,
          frozen: h.frozen,
          pagedOut: h.pagedOut,
          starting: h.starting,
          busy: h.busy,
          runtimesMemoryBytes: h.runtimesMemoryBytes,
          memoryTotalBytes: h.memoryTotalBytes,
          memoryAvailableBytes: h.memoryAvailableBytes,
          freezer: h.freezer,
          // Which limits hold there, and why not the others.
          limits: h.limits,
          diskTotalBytes: h.diskTotalBytes,
          diskFreeBytes: h.diskFreeBytes,
          reportedAt: h.reportedAt,
        })),
        workspaceQuotaBytes: quota,
        // This workspace's people against their limits, nearest first: memory and processes while their
        // runtime runs (as its host last read them), disk whether it runs or not (their files stay).
        people: usage.map((reported) => {
          const u = { ...usageAsOf(reported, Date.now(), HOST_REPORT_FRESH_MS), diskQuotaBytes: quota ?? reported.diskQuotaBytes };
          return {
            userId: u.userId,
            handle: u.handle,
            host: u.host,
            running: u.running,
            memoryBytes: u.memoryBytes,
            memoryMaxBytes: u.memoryMaxBytes,
            pids: u.pids,
            pidsMax: u.pidsMax,
            diskBytes: u.diskBytes,
            diskQuotaBytes: u.diskQuotaBytes,
            diskMeasuredAt: u.diskMeasuredAt,
            oomKills: u.oomKills,
            pidsRefused: u.pidsRefused,
            near: nearLimits(u),
            overQuota: overQuota(u.diskBytes, u.diskQuotaBytes),
            updatedAt: u.updatedAt,
          };
        }),
      };
      const appliedAt = settings?.appliedAt ?? null;
      const byId = /^user:([0-9a-f-]{36})$/i.exec(settings?.appliedBy ?? '')?.[1];
      const byPerson = byId && deps.personOf ? await deps.personOf(tenantId, byId) : null;
      return {
        ready: readiness.ready,
        ...(readiness.ready ? {} : { detail: readiness.detail }),
        defaultModel: settings?.defaultModel ?? null,
        applied: settings?.applied ? { ...settings.applied, at: appliedAt, by: settings.appliedBy, byPerson } : null,
        pendingChanges: !appliedAt || providers.some((p) => p.updatedAt > appliedAt) || (settings?.defaultModel ?? null) !== (settings?.applied?.defaultModel ?? null),
        runtime,
        providers: providers.map(publicProvider),
      };
    },

    /**
     * The model a turn runs on: the session's snapshot override, else the tenant's applied default.
     * Throws runtime_not_ready unless it belongs to an applied, enabled provider.
     */
    async resolveModel(tenantId: string, override?: string | null): Promise<ResolvedModel> {
      const [providers, settings] = await Promise.all([deps.providers.list(db, tenantId), repo.settings(db, tenantId)]);
      const readiness = readinessOf(settings?.applied ?? null, providers);
      if (!readiness.ready) throw new RuntimeNotReadyError(readiness.detail);
      return resolvedOf(tenantId, override || settings!.applied!.defaultModel, providers, settings!.applied!);
    },

    /**
     * The model a turn runs on: the turn's choice, else the session's, else its template's, else
     * the tenant's applied default. A person's own choice (turn or session) must be served now and in the
     * allow-list of `permissions` (model-choice-fns.ts: 400 model_unknown, 409 provider_disabled, 403
     * model_not_allowed); a template's or the default must be served (else runtime_not_ready, as before).
     * Called when a prompt is accepted and again when its turn is sent: either may change in between.
     */
    async resolveTurnModel(tenantId: string, choice: { turn?: string | null; session?: string | null; template?: string | null }, permissions: RbacPermissions): Promise<ResolvedModel & { source: ModelSource }> {
      const [providers, settings] = await Promise.all([deps.providers.list(db, tenantId), repo.settings(db, tenantId)]);
      const readiness = readinessOf(settings?.applied ?? null, providers);
      if (!readiness.ready) throw new RuntimeNotReadyError(readiness.detail);
      const applied = settings!.applied!;
      const chosen = effectiveModel(choice, applied.defaultModel)!;
      if (chosen.source === 'turn' || chosen.source === 'session') {
        const { provider, modelId } = checkModelChoice(chosen.ref, { providers, applied: applied.providers }, permissions, 'model', chosen.source === 'turn' ? 'model' : "the session's model");
        return { providerID: runtimeProviderId(tenantId, provider.name), modelID: modelId, ref: chosen.ref, source: chosen.source };
      }
      return { ...resolvedOf(tenantId, chosen.ref, providers, applied), source: chosen.source };
    },

    /** Checks a person's choice of model for a session (as resolveTurnModel checks it), before it is stored. */
    async checkChoice(tenantId: string, ref: string, permissions: RbacPermissions): Promise<void> {
      const [providers, settings] = await Promise.all([deps.providers.list(db, tenantId), repo.settings(db, tenantId)]);
      checkModelChoice(ref, { providers, applied: settings?.applied?.providers ?? [] }, permissions);
    },

    /**
     * The models a person holding `permissions` may choose (GET /v1/models), and the tenant's applied
     * default. `all`: every model served, each with whether they may (the roles screen's list).
     */
    async catalog(tenantId: string, permissions: RbacPermissions, o: { all?: boolean } = {}) {
      const [providers, settings] = await Promise.all([deps.providers.list(db, tenantId), repo.settings(db, tenantId)]);
      const applied = settings?.applied ?? null;
      const defaultModel = applied && readinessOf(applied, providers).ready ? applied.defaultModel : null;
      return { defaultModel, models: modelCatalog({ providers, applied: applied?.providers ?? [] }, defaultModel, permissions, o) };
    },

    /** The tenant's applied default model while prompts can run on it, else null. */
    async appliedDefault(tenantId: string): Promise<string | null> {
      const [providers, settings] = await Promise.all([deps.providers.list(db, tenantId), repo.settings(db, tenantId)]);
      const applied = settings?.applied ?? null;
      return applied && readinessOf(applied, providers).ready ? applied.defaultModel : null;
    },

    /** Validates a model reference against the tenant's providers (used for template overrides). */
    async checkModel(tenantId: string, ref: string): Promise<void> {
      checkModelRef(ref, await deps.providers.list(db, tenantId));
    },

    /**
     * What the sessions screen shows a workspace that cannot prompt yet (any member): whether prompts
     * can start, the first-run steps done, whether the caller can do them (admin.manage_providers), and
     * otherwise who can.
     */
    async setup(ctx: Ctx) {
      const tenantId = tenantOf(ctx);
      const [providers, settings] = await Promise.all([deps.providers.list(db, tenantId), repo.settings(db, tenantId)]);
      const readiness = readinessOf(settings?.applied ?? null, providers);
      const canSetUp = ctx.actor.kind === 'system' || (ctx.actor.kind === 'user' && hasPermission(ctx.actor.permissions, 'admin.manage_providers'));
      return {
        ready: readiness.ready,
        ...(readiness.ready ? {} : { detail: readiness.detail }),
        steps: {
          provider: providers.some((p) => p.enabled && p.models.length > 0),
          defaultModel: Boolean(settings?.defaultModel),
          applied: readiness.ready,
        },
        canSetUp,
        // Only when there is something to ask for.
        ask: !readiness.ready && !canSetUp && deps.managers ? (await deps.managers(tenantId)).map((m) => ({ name: m.displayName || m.handle, email: m.email })) : [],
      };
    },
  };
}

/** A template's or the default model, served by an applied, enabled provider; else runtime_not_ready. */
function resolvedOf(tenantId: string, ref: string, providers: ProviderRow[], applied: AppliedState): ResolvedModel {
  const m = MODEL_REF.exec(ref);
  const provider = m && providers.find((p) => p.name === m[1]);
  if (!m || !provider || !provider.enabled || !applied.providers.includes(provider.name) || !provider.models.some((x) => x.id === m[2])) {
    throw new RuntimeNotReadyError(`model ${ref} (the session's template override) is not served by an applied provider`);
  }
  return { providerID: runtimeProviderId(tenantId, provider.name), modelID: m[2], ref };
}

function readinessOf(applied: AppliedState | null, providers: ProviderRow[]): { ready: true } | { ready: false; detail: string } {
  if (!applied) return { ready: false, detail: 'no runtime configuration has been applied for this workspace' };
  const m = MODEL_REF.exec(applied.defaultModel);
  const provider = m && providers.find((p) => p.name === m[1]);
  if (!provider || !applied.providers.includes(provider.name)) return { ready: false, detail: `the applied default model ${applied.defaultModel} has no provider any more` };
  if (!provider.enabled) return { ready: false, detail: `the provider of the default model (${provider.name}) is disabled` };
  if (!provider.models.some((x) => x.id === m![2])) return { ready: false, detail: `provider ${provider.name} no longer lists model ${m![2]}` };
  return { ready: true };
}

export type RuntimeService = ReturnType<typeof createRuntimeService>;
