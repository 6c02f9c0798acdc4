import { randomBytes } from 'node:crypto';
import type { Database } from '../../db/database.js';
import type { SecretBox } from '../../lib/secret-box.js';
import { checkWebhookUrl } from '../../lib/url-guard.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission, tenantOf } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { NotFoundError, ValidationError } from '../../kernel/errors.js';
import type { RoleAssignmentsRepo } from '../rbac/role-assignments.repo.js';
import type { RolesRepo } from '../rbac/roles.repo.js';
import type { UsersRepo } from '../users/users.repo.js';
import type { GatewayRow, GatewaysRepo } from './gateways.repo.js';
import { GATEWAY_KINDS, type ChatPlatform, type GatewayKind } from './platforms.js';

/** The Gateway resource of SPEC.md: the bot token and webhook secret never leave the service. */
function publicGateway(g: GatewayRow) {
  return { id: g.id, kind: g.kind, botUsername: g.botUsername, botId: g.botId, webhookUrl: g.webhookUrl, enabled: g.enabled, createdAt: g.createdAt, updatedAt: g.updatedAt };
}
export type PublicGateway = ReturnType<typeof publicGateway>;

/**
 * SPEC.md Authentication 5: gateway routes need admin.manage_providers, except in local development
 * (no service API key configured), where the check is bypassed; `aws serve` and /v1/auth/status say so.
 */
export function createGatewayAccess(devBypass: boolean) {
  return (ctx: Ctx): string => (devBypass ? tenantOf(ctx) : requirePermission(ctx, 'admin.manage_providers'));
}

export function createGatewaysService(deps: {
  db: Database;
  repo: GatewaysRepo;
  users: UsersRepo;
  roles: RolesRepo;
  assignments: RoleAssignmentsRepo;
  audit: AuditService;
  box: SecretBox;
  platforms: Record<GatewayKind, ChatPlatform>;
  access: (ctx: Ctx) => string;
  /** Called after a gateway changes, so caches of it (the webhook route's) drop it. */
  onChange: (gatewayId: string) => void;
  /** Resolves webhook host names (tests inject one; production uses DNS). */
  resolve?: (hostname: string) => Promise<string[]>;
}) {
  const { db, repo, audit, box } = deps;

  async function load(ctx: Ctx, id: string): Promise<GatewayRow> {
    const tenantId = deps.access(ctx);
    const g = /^[0-9a-f-]{36}$/i.test(id) ? await repo.find(db, tenantId, id) : null;
    if (!g) throw new NotFoundError('gateway not found');
    return g;
  }

  const checkKind = (kind: string): GatewayKind => {
    if (!GATEWAY_KINDS.includes(kind as GatewayKind)) {
      throw new ValidationError(`kind must be bot_chat or team_chat, got "${kind}"`, { hint: 'Other channels are configured outside this API.' });
    }
    return kind as GatewayKind;
  };

  return {
    load,

    async list(ctx: Ctx): Promise<PublicGateway[]> {
      return (await repo.list(db, deps.access(ctx))).map(publicGateway);
    },

    async get(ctx: Ctx, id: string): Promise<PublicGateway> {
      return publicGateway(await load(ctx, id));
    },

    /**
     * Creates a gateway (bot_chat or team_chat). The token is sealed before it is stored. Each gateway
     * gets its own service user with the member role: the paired chat users' agent sessions belong to it,
     * so they can run agents but never act with the rights of whoever created the gateway.
     */
    async create(ctx: Ctx, input: { kind: string; botToken: string; botUsername: string; botId: string }): Promise<PublicGateway> {
      const tenantId = deps.access(ctx);
      const kind = checkKind(input.kind);
      if (!input.botToken?.trim()) throw new ValidationError('botToken must not be empty');
      return db.transaction(async (tx) => {
        const id = crypto.randomUUID();
        const user = await deps.users.insert(tx, {
          tenantId,
          handle: `gateway-${id.slice(0, 8)}`,
          email: `gateway-${id}@gateways.agentws.invalid`,
          displayName: `${kind} @${input.botUsername}`,
        });
        const member = await deps.roles.findByName(tx, tenantId, 'member');
        if (member) await deps.assignments.assign(tx, { tenantId, userId: user.id, roleId: member.id, assignedBy: 'system:gateways' });
        const g = await repo.insert(tx, { tenantId, kind, botUsername: input.botUsername, botId: input.botId, botTokenSealed: box.seal(input.botToken), serviceUserId: user.id });
        await audit.record(tx, { ...ctx, tenantId }, { action: 'gateway.create', target: `gateway:${g.id}`, details: { kind, botUsername: g.botUsername, botId: g.botId, serviceUserId: user.id } });
        return publicGateway(g);
      });
    },

    /** Enables or disables a gateway, or rotates its bot token (SPEC.md PATCH). */
    async update(ctx: Ctx, id: string, input: { enabled?: boolean; botToken?: string }): Promise<PublicGateway> {
      const g = await load(ctx, id);
      if (input.botToken !== undefined && !input.botToken.trim()) throw new ValidationError('botToken must not be empty');
      const updated = await db.transaction(async (tx) => {
        const row = await repo.update(tx, g.tenantId, g.id, { enabled: input.enabled, botTokenSealed: input.botToken ? box.seal(input.botToken) : undefined });
        if (!row) throw new NotFoundError('gateway not found');
        const changes: Record<string, unknown> = {};
        if (input.enabled !== undefined) changes.enabled = input.enabled;
        if (input.botToken) changes.botToken = 'rotated';
        await audit.record(tx, ctx, { action: 'gateway.update', target: `gateway:${g.id}`, details: changes });
        return row;
      });
      deps.onChange(g.id);
      return publicGateway(updated);
    },

    /** Deletes a gateway with its paired users and pairing codes. */
    async remove(ctx: Ctx, id: string): Promise<void> {
      const g = await load(ctx, id);
      await db.transaction(async (tx) => {
        // Concurrent deletes: the one that removed it audits it; the others are 404.
        if (!(await repo.remove(tx, g.tenantId, g.id))) throw new NotFoundError('gateway not found');
        await audit.record(tx, ctx, { action: 'gateway.delete', target: `gateway:${g.id}`, details: { kind: g.kind, botUsername: g.botUsername } });
      });
      deps.onChange(g.id);
    },

    /**
     * Registers the webhook with the platform (SPEC.md rule 2): the URL must be https and public (every
     * address its name resolves to); a new random secret is sent to the platform and stored sealed.
     * The platform unreachable: 502, nothing changed.
     */
    async registerWebhook(ctx: Ctx, id: string, input: { webhookUrl: string }): Promise<PublicGateway> {
      const g = await load(ctx, id);
      const url = await checkWebhookUrl(input.webhookUrl, { resolve: deps.resolve });
      const secret = randomBytes(32).toString('base64url');
      await deps.platforms[g.kind].setWebhook({ botToken: box.open(g.botTokenSealed), botId: g.botId, url: url.href, secret });
      const updated = await db.transaction(async (tx) => {
        const row = await repo.update(tx, g.tenantId, g.id, { webhookUrl: url.href, webhookSecretSealed: box.seal(secret) });
        if (!row) throw new NotFoundError('gateway not found');
        await audit.record(tx, ctx, { action: 'gateway.webhook_register', target: `gateway:${g.id}`, details: { webhookUrl: url.href } });
        return row;
      });
      deps.onChange(g.id);
      return publicGateway(updated);
    },
  };
}
