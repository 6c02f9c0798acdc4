import { Type } from '@sinclair/typebox';
import { AUDIT_LIMIT_DEFAULT, AUDIT_LIMIT_MAX } from '../../../core/audit/audit.service.js';
import type { Core } from '../../../core/create-core.js';
import type { RbacPermissions } from '../../../kernel/permissions.js';
import { PartialPermissions } from '../../../core/rbac/rbac.schemas.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

const Uuid = Type.String({ format: 'uuid' });
const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);

const Person = Type.Object({ id: Uuid, name: Type.String({ description: 'Display name, else handle' }), email: Type.String() });
export const AuditEntry = Type.Object({
  id: Uuid,
  ts: DateTime,
  tenantId: Nullable(Uuid),
  userId: Nullable(Uuid),
  actor: Type.String({ description: 'user:<uuid>, system:<name> (CLI, worker) or anonymous' }),
  action: Type.String(),
  target: Type.String(),
  sessionId: Nullable(Uuid),
  channel: Type.String(),
  durationMs: Type.Union([Type.Integer(), Type.Null()]),
  actorPerson: Type.Optional(Type.Union([Person, Type.Null()], { description: 'The actor when a person of the entry\'s tenant: name and email' })),
  targetPerson: Type.Optional(Type.Union([Person, Type.Null()], { description: 'The target when a person of the entry\'s tenant (user:<uuid>): name and email' })),
});

/** Tokens by kind, adding up to the total (not in SPEC.md: each kind has its own price). */
const TokenSplit = {
  inputTokens: Type.Integer({ description: 'Input tokens neither read from nor written to the provider\'s prompt cache' }),
  outputTokens: Type.Integer({ description: 'Output tokens, reasoning not included' }),
  reasoningTokens: Type.Integer(),
  cacheReadTokens: Type.Integer({ description: 'Input tokens read from the prompt cache (billed at the cache read price)' }),
  cacheWriteTokens: Type.Integer({ description: 'Input tokens written to the prompt cache (billed at the cache write price)' }),
};
const Totals = Type.Object({ tokens: Type.Integer(), cost: Type.Number(), ...TokenSplit });
/** Tokens and cost over time (GET /v1/admin/usage/series). */
export const UsageSeries = Type.Object({
  window: Type.Object({ since: Type.String(), from: DateTime, to: DateTime }),
  bucket: Type.Union([Type.Literal('hour'), Type.Literal('day')]),
  points: Type.Array(Type.Object({ at: DateTime, model: Type.String(), userId: Nullable(Uuid), tokens: Type.Integer(), cost: Type.Number() }), { description: 'Only buckets that saw use, oldest first' }),
});
export const UsageDigest = Type.Object({
  totalTokens: Type.Integer(),
  totalCostUsd: Type.Number(),
  ...TokenSplit,
  byModel: Type.Record(Type.String(), Totals),
  byUser: Type.Record(Type.String(), Totals),
  window: Type.Object({ since: Type.String(), from: DateTime, to: DateTime }),
});

const Permissions = Type.Unsafe<RbacPermissions>({ type: 'object', additionalProperties: true, description: 'RbacPermissions document (SPEC.md)' });
export const Role = Type.Object({
  id: Uuid,
  name: Type.String(),
  description: Type.String(),
  isSystem: Type.Boolean(),
  permissions: Permissions,
  members: Type.Optional(Type.Integer()),
  createdAt: DateTime,
});
export const User = Type.Object({
  id: Uuid,
  handle: Type.String(),
  email: Type.String(),
  displayName: Type.String(),
  roles: Type.Array(Type.String()),
  createdAt: DateTime,
});
const Assignment = Type.Object({ userId: Uuid, role: Type.Object({ id: Uuid, name: Type.String() }), roles: Type.Array(Type.String()), changed: Type.Boolean() });
const Tenant = Type.Object({ id: Uuid, slug: Type.String(), name: Type.String(), settings: Type.Record(Type.String(), Type.Unknown()) });

/** SPEC.md "Admin endpoints": audit log, usage, users, roles, tenant settings. */
export async function adminRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { audit, usage, users, rbac, tenants } = opts.core;
  const denied = errorResponses(400, 401, 403);

  app.get(
    '/admin/audit-log',
    {
      schema: {
        tags: ['admin'],
        summary: 'Audit entries of the tenant, newest first (admin.view_audit_log)',
        querystring: Type.Object({
          action: Type.Optional(Type.String({ maxLength: 200, description: 'Exact match, e.g. tool.execute' })),
          userId: Type.Optional(Uuid),
          user: Type.Optional(Type.String({ maxLength: 320, description: 'A person by id, email, handle or display name (whole values, any case): entries by them or about them (target user:<id>). 400 naming `user` when no one matches' })),
          since: Type.Optional(Type.String({ description: 'ISO 8601' })),
          until: Type.Optional(Type.String({ description: 'ISO 8601' })),
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: AUDIT_LIMIT_MAX, default: AUDIT_LIMIT_DEFAULT })),
        }),
        response: { 200: Type.Object({ entries: Type.Array(AuditEntry), count: Type.Integer({ description: 'Number of entries returned' }) }), ...denied },
      },
    },
    async (req) => audit.query(ctxOf(req), req.query),
  );

  app.get(
    '/admin/usage/series',
    {
      schema: {
        tags: ['admin'],
        summary: 'Tokens and cost of the tenant over time, per hour (windows up to 48h) or day, per model and user (admin.view_audit_log)',
        querystring: Type.Object({ since: Type.Optional(Type.String({ description: 'Duration: 24h, 7d, 30d, ... (default 24h)' })) }),
        response: {
          200: UsageSeries,
          ...denied,
        },
      },
    },
    async (req) => {
      const { since, from, to, bucket, points } = await usage.series(ctxOf(req), { since: req.query.since });
      return { window: { since, from, to }, bucket, points };
    },
  );

  app.get(
    '/admin/usage',
    {
      schema: {
        tags: ['admin'],
        summary: 'Tokens and cost of the tenant over a window (admin.view_audit_log)',
        querystring: Type.Object({ since: Type.Optional(Type.String({ description: 'Duration: 24h, 7d, 30d, ... (default 24h)' })) }),
        response: { 200: UsageDigest, ...denied },
      },
    },
    async (req) => {
      const { since, from, to, ...digest } = await usage.digest(ctxOf(req), { since: req.query.since });
      return { ...digest, window: { since, from, to } };
    },
  );

  app.get(
    '/admin/users',
    { schema: { tags: ['admin'], summary: 'Users of the tenant with their roles (admin.manage_users)', response: { 200: Type.Object({ users: Type.Array(User) }), ...denied } } },
    async (req) => ({ users: await users.listUsers(ctxOf(req)) }),
  );

  app.delete(
    '/admin/users/:userId',
    {
      schema: {
        tags: ['admin'],
        summary: 'Remove a user with their roles, sign-ins and sessions; their tokens stop working at once (admin.manage_users)',
        description: 'Refused (409) for yourself, the operator user, a gateway\'s service user and the last owner; only owners remove owners (403).',
        params: Type.Object({ userId: Uuid }),
        response: { 204: Type.Null(), ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (req, reply) => {
      await users.removeUser(ctxOf(req), { userId: req.params.userId });
      return reply.status(204).send(null);
    },
  );

  app.get(
    '/admin/roles',
    { schema: { tags: ['admin'], summary: 'Roles of the tenant with their permission documents (admin.manage_roles)', response: { 200: Type.Object({ roles: Type.Array(Role) }), ...denied } } },
    async (req) => ({ roles: await rbac.listRoles(ctxOf(req)) }),
  );

  app.post(
    '/admin/roles',
    {
      schema: {
        tags: ['admin'],
        summary: 'Create a custom role from a partial permission document; missing members are not granted (admin.manage_roles)',
        body: Type.Object({ name: Type.String({ minLength: 1, maxLength: 63 }), description: Type.Optional(Type.String({ maxLength: 500 })), permissions: PartialPermissions }),
        response: { 201: Type.Object({ role: Role }), ...errorResponses(400, 401, 403, 409) },
      },
    },
    async (req, reply) => reply.status(201).send({ role: await rbac.createRole(ctxOf(req), req.body) }),
  );

  app.patch(
    '/admin/roles/:roleId',
    {
      schema: {
        tags: ['admin'],
        summary: 'Change a role (admin.manage_roles): each permission group given replaces that group, groups left out keep their value',
        description: 'A system role keeps its document and description except its cost limits, agents.terminal, agents.code_host and models.allowed (400 otherwise). The new document must be within your own permissions (403 naming what it exceeds); only owners change the owner role.',
        params: Type.Object({ roleId: Uuid }),
        body: Type.Object({ description: Type.Optional(Type.String({ maxLength: 500 })), permissions: Type.Optional(PartialPermissions) }, { additionalProperties: false }),
        response: { 200: Type.Object({ role: Role }), ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (req) => ({ role: await rbac.updateRole(ctxOf(req), { roleId: req.params.roleId, ...req.body }) }),
  );

  app.post(
    '/admin/users/:userId/roles',
    {
      schema: {
        tags: ['admin'],
        summary: 'Assign a role to a user (admin.manage_roles); idempotent',
        params: Type.Object({ userId: Uuid }),
        body: Type.Object({ roleId: Uuid }),
        response: { 200: Assignment, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (req) => {
      const r = await rbac.assignRole(ctxOf(req), { userId: req.params.userId, roleId: req.body.roleId });
      return { userId: r.user.id, role: r.role, roles: r.roles, changed: r.assigned };
    },
  );

  app.delete(
    '/admin/users/:userId/roles/:roleId',
    {
      schema: {
        tags: ['admin'],
        summary: 'Remove a role from a user (admin.manage_roles); the last owner keeps the owner role',
        params: Type.Object({ userId: Uuid, roleId: Uuid }),
        response: { 200: Assignment, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (req) => {
      const r = await rbac.revokeRole(ctxOf(req), { userId: req.params.userId, roleId: req.params.roleId });
      return { userId: r.user.id, role: r.role, roles: r.roles, changed: true };
    },
  );

  app.get(
    '/admin/tenant',
    { schema: { tags: ['admin'], summary: 'The tenant with its settings (admin.manage_tenant)', response: { 200: Type.Object({ tenant: Tenant }), ...denied } } },
    async (req) => {
      const t = await tenants.getTenant(ctxOf(req));
      return { tenant: { id: t.id, slug: t.slug, name: t.name, settings: t.settings } };
    },
  );

  app.patch(
    '/admin/tenant',
    {
      schema: {
        tags: ['admin'],
        summary: 'Update tenant settings (admin.manage_tenant): groupRoleMapping and groupTeamMapping (applied at each sign-in only when signIn.applyGroupMapping is true), egress (domains, addresses and ranges the agents may or may not reach through the egress proxy, and the ports they may use besides 80 and 443; keys left out keep their value), skills (the people a learnt skill needs, the hosts it may name unflagged), memory (agentSavesNeedRelease: every memory an agent saves waits for its person\'s release) and workspace (quotaMb: the disk each person\'s files may take)',
        body: Type.Object({
          settings: Type.Object(
            {
              groupRoleMapping: Type.Optional(Type.Record(Type.String({ minLength: 1, maxLength: 200 }), Type.String({ minLength: 1, maxLength: 63 }))),
              groupTeamMapping: Type.Optional(
                Type.Record(Type.String({ minLength: 1, maxLength: 200 }), Type.String({ minLength: 1, maxLength: 100 }), {
                  description: 'Identity-provider group id or name -> team name (the team must exist); applied at sign-in only with signIn.applyGroupMapping',
                }),
              ),
              signIn: Type.Optional(
                Type.Object(
                  {
                    applyGroupMapping: Type.Optional(
                      Type.Boolean({ description: "Each sign-in applies groupRoleMapping and groupTeamMapping from the ID token's groups claim (default false: SPEC.md's sign-in does not apply them)" }),
                    ),
                  },
                  { additionalProperties: false },
                ),
              ),
              egress: Type.Optional(
                Type.Object(
                  {
                    allow: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 253 }), { maxItems: 500, description: 'Domains (a domain covers its subdomains), addresses or CIDR ranges the tenant\'s agents may reach; set: only these' })),
                    deny: Type.Optional(
                      Type.Array(Type.String({ minLength: 1, maxLength: 253 }), { maxItems: 500, description: 'Domains, addresses or CIDR ranges the tenant\'s agents may never reach (a domain also by the addresses it resolves to)' }),
                    ),
                    ports: Type.Optional(Type.Array(Type.Integer({ minimum: 1, maximum: 65535 }), { maxItems: 100, description: 'Ports the tenant\'s agents may connect to besides 80 and 443 (and the operator\'s AGENTWS_EGRESS_PORTS)' })),
                  },
                  { additionalProperties: false },
                ),
              ),
              skills: Type.Optional(
                Type.Object(
                  {
                    minUsers: Type.Optional(Type.Integer({ minimum: 1, maximum: 20, description: 'Different people whose similar work a learnt skill needs (default 2)' })),
                    allowedHosts: Type.Optional(
                      Type.Array(Type.String({ minLength: 1, maxLength: 253 }), { maxItems: 500, description: 'Hosts a learnt skill may name without a flag for its reviewer (a domain covers its subdomains; egress.allow counts too)' }),
                    ),
                  },
                  { additionalProperties: false },
                ),
              ),
              tokens: Type.Optional(
                Type.Object(
                  {
                    maxDays: Type.Optional(Type.Integer({ minimum: 1, maximum: 366, description: 'The longest lifetime a new personal access token may have, in days (default 90)' })),
                    scimMaxDays: Type.Optional(Type.Integer({ minimum: 1, maximum: 366, description: 'The longest lifetime a new or renewed SCIM token may have, in days (default 365)' })),
                  },
                  { additionalProperties: false },
                ),
              ),
              memory: Type.Optional(
                Type.Object(
                  {
                    agentSavesNeedRelease: Type.Optional(
                      Type.Boolean({ description: 'Every memory an agent saves is quarantined until its person releases it, whatever it says (default false: only those that read like instructions)' }),
                    ),
                  },
                  { additionalProperties: false },
                ),
              ),
              privacy: Type.Optional(
                Type.Object(
                  {
                    sharedMemoriesOnErase: Type.Optional(
                      Type.Union([Type.Literal('remove'), Type.Literal('keep-anonymous')], {
                        description: "What erasing a person does with their team and org memories: remove them (default), or keep them for the others under a pseudonymous placeholder author",
                      }),
                    ),
                  },
                  { additionalProperties: false },
                ),
              ),
              workspace: Type.Optional(
                Type.Object(
                  {
                    quotaMb: Type.Optional(
                      Type.Union([Type.Integer({ minimum: 100 }), Type.Null()], {
                        description: 'Disk each of the tenant\'s people may take (workspace, runtime home), in MiB, at most the operator\'s AGENTWS_WORKSPACE_QUOTA_MAX; null: the operator\'s default (AGENTWS_WORKSPACE_QUOTA). Measured: past it the person\'s agent is stopped and new turns refused until they are under it',
                      }),
                    ),
                  },
                  { additionalProperties: false },
                ),
              ),
            },
            { additionalProperties: false },
          ),
        }),
        response: { 200: Type.Object({ tenant: Tenant }), ...errorResponses(400, 401, 403) },
      },
    },
    async (req) => {
      const t = await tenants.updateSettings(ctxOf(req), req.body);
      return { tenant: { id: t.id, slug: t.slug, name: t.name, settings: t.settings } };
    },
  );
}
