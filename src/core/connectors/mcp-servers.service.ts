import type { Database } from '../../db/database.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { ConflictError, NotFoundError, ValidationError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/logger.js';
import { accessProblems, checkAuthHeader, checkServerUrl, grantFor, normaliseAccessEntry, secretProblems, serverNameProblems, type McpAccessEntry, type McpAuthKind, type McpGrant } from './mcp-fns.js';
import { MCP_CONNECTOR_PATH_PREFIX } from '../runtime/host/agent-endpoints.js';
import type { McpServerRow, McpServersRepo } from './mcp-servers.repo.js';
import type { McpServerInput, McpServerPatch } from './mcp-servers.schemas.js';

/** What the gateway needs to forward one user's request to a server: never shown to anyone. */
export interface McpServerGrant extends McpGrant {
  name: string;
  url: string;
  /** The header carrying the opened secret; null when the server takes none. */
  credential: { header: string; value: string } | null;
}

/**
 * MCP connectors: a tenant's remote MCP servers, their sealed credentials and which
 * roles may use which of their tools, resources and prompts (resources and prompts apart, none
 * unless granted). Admins manage them (admin.manage_providers, like the model
 * providers: both are what the tenant's agents may reach with the organisation's keys); runtimes and the
 * gateway read them without a ctx, always for one runtime's own user.
 */
export function createMcpServersService(deps: {
  db: Database;
  repo: McpServersRepo;
  audit: AuditService;
  box: SecretBox;
  /** The role names of a user (their runtime's identity says who; roles are read at every check). */
  rolesOf: (userId: string) => Promise<string[]>;
  /** A tenant's servers changed: running runtimes take their new configuration (best effort). */
  changed?: (tenantId: string) => void;
  log: Logger;
}) {
  const { db, repo, audit, box } = deps;

  const publicServer = (s: McpServerRow) => ({
    name: s.name,
    url: s.url,
    authKind: s.authKind,
    authHeader: s.authHeader,
    hasSecret: s.secretSealed !== null,
    access: s.access.map(normaliseAccessEntry),
    enabled: s.enabled,
    gatewayPath: `${MCP_CONNECTOR_PATH_PREFIX}${s.name}`,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  });

  /** The credential settings as stored, from what was asked: all problems reported together. */
  function credentialOf(authKind: McpAuthKind | undefined, authHeader: string | null | undefined, secret: string | null | undefined, problems: string[]) {
    const kind: McpAuthKind = authKind ?? (secret ? 'bearer' : 'none');
    let header: string | null = null;
    if (kind === 'none') {
      if (secret) problems.push('secret was given but authKind is none');
      if (authHeader) problems.push('authHeader is only for authKind header');
      return { authKind: kind, authHeader: null, secret: null };
    }
    if (!secret) problems.push(`authKind ${kind} needs a secret`);
    else problems.push(...secretProblems(secret));
    if (kind === 'header') {
      if (!authHeader) problems.push('authKind header needs authHeader (the header the secret goes in)');
      else {
        const h = checkAuthHeader(authHeader);
        if ('problem' in h) problems.push(h.problem);
        else header = h.header;
      }
    } else if (authHeader) problems.push('authHeader is only for authKind header');
    return { authKind: kind, authHeader: header, secret: secret ?? null };
  }

  const fail = (problems: string[]) => {
    if (problems.length) throw new ValidationError(problems.join('; '), { details: { problems } });
  };

  async function load(tenantId: string, name: string): Promise<McpServerRow> {
    const s = await repo.find(db, tenantId, name);
    if (!s) throw new NotFoundError(`MCP server "${name}" not found`, { hint: 'List them with `npx aws connector mcp list`.' });
    return s;
  }

  const auditDetails = (s: McpServerRow, secret: string) => ({ url: s.url, authKind: s.authKind, authHeader: s.authHeader, secret, access: s.access.map(normaliseAccessEntry), enabled: s.enabled });

  return {
    /** The tenant's MCP servers (admin.manage_providers). Secrets are never returned. */
    async list(ctx: Ctx) {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      return (await repo.list(db, tenantId)).map(publicServer);
    },

    /** One server (admin.manage_providers). */
    async get(ctx: Ctx, name: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      return publicServer(await load(tenantId, name));
    },

    /** Registers a server; its secret is sealed before it is stored. Runtimes take it at their next turn. */
    async create(ctx: Ctx, input: McpServerInput) {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      const problems = serverNameProblems(input.name);
      const url = checkServerUrl(input.url);
      if ('problem' in url) problems.push(url.problem);
      const access: McpAccessEntry[] = (input.access ?? []).map(normaliseAccessEntry);
      problems.push(...accessProblems(access));
      const cred = credentialOf(input.authKind, input.authHeader, input.secret, problems);
      fail(problems);
      const row = await db.transaction(async (tx) => {
        const r = await repo.insert(tx, {
          tenantId,
          name: input.name,
          url: (url as { url: string }).url,
          authKind: cred.authKind,
          authHeader: cred.authHeader,
          secretSealed: cred.secret ? box.seal(cred.secret) : null,
          access,
          enabled: input.enabled ?? true,
        });
        if (!r) throw new ConflictError(`MCP server "${input.name}" already exists`, { hint: 'Change it instead (`npx aws connector mcp update`, PATCH /v1/admin/connectors/mcp/:name), or remove it first.' });
        await audit.record(tx, ctx, { action: 'connector.mcp.add', target: `mcp:${r.name}`, details: auditDetails(r, cred.secret ? 'set' : 'none') });
        return r;
      });
      deps.changed?.(tenantId);
      return publicServer(row);
    },

    /**
     * Changes a server. A stored secret never follows the URL to another origin on its own: such a change
     * must bring the secret for the new host or drop it (`secret: null`); a new path on the same origin keeps it.
     */
    async update(ctx: Ctx, name: string, patch: McpServerPatch) {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      const row = await db.transaction(async (tx) => {
        const cur = await repo.find(tx, tenantId, name);
        if (!cur) throw new NotFoundError(`MCP server "${name}" not found`, { hint: 'List them with `npx aws connector mcp list`.' });
        const problems: string[] = [];
        let url = cur.url;
        if (patch.url !== undefined) {
          const u = checkServerUrl(patch.url);
          if ('problem' in u) problems.push(u.problem);
          else url = u.url;
        }
        const moved = new URL(url).origin !== new URL(cur.url).origin;
        if (moved && cur.secretSealed && patch.secret === undefined) problems.push('url moves to another origin: give the secret for the new host, or secret: null to drop the stored one');
        const access = (patch.access ?? cur.access).map(normaliseAccessEntry);
        if (patch.access) problems.push(...accessProblems(access));
        // The credential as a whole: the stored secret stays unless replaced or dropped.
        const secret = patch.secret === null || (patch.authKind === 'none' && patch.secret === undefined) ? null : (patch.secret ?? (cur.secretSealed ? box.open(cur.secretSealed) : null));
        const kind = patch.secret === null && patch.authKind === undefined ? 'none' : (patch.authKind ?? cur.authKind);
        const header = kind === 'header' ? (patch.authHeader ?? cur.authHeader) : patch.authHeader;
        const cred = credentialOf(kind, header, secret, problems);
        fail(problems);
        const next = await repo.update(tx, tenantId, name, {
          url,
          authKind: cred.authKind,
          authHeader: cred.authHeader,
          secretSealed: cred.secret === null ? null : patch.secret ? box.seal(cred.secret) : cur.secretSealed,
          access,
          enabled: patch.enabled ?? cur.enabled,
        });
        if (!next) throw new NotFoundError(`MCP server "${name}" not found`);
        await audit.record(tx, ctx, {
          action: 'connector.mcp.update',
          target: `mcp:${name}`,
          details: { ...auditDetails(next, patch.secret === undefined ? (next.secretSealed ? 'kept' : 'none') : patch.secret === null ? 'removed' : 'replaced'), changed: Object.keys(patch).sort() },
        });
        return next;
      });
      deps.changed?.(tenantId);
      return publicServer(row);
    },

    /** Removes a server and its secret; runtimes drop it at their next turn, and the gateway at once. */
    async remove(ctx: Ctx, name: string): Promise<void> {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      await db.transaction(async (tx) => {
        if (!(await repo.remove(tx, tenantId, name))) throw new NotFoundError(`MCP server "${name}" not found`, { hint: 'List them with `npx aws connector mcp list`.' });
        await audit.record(tx, ctx, { action: 'connector.mcp.remove', target: `mcp:${name}` });
      });
      deps.changed?.(tenantId);
    },

    /** The names of the enabled servers a user's roles may use: what their runtime's configuration lists. */
    async serversFor(tenantId: string, userId: string): Promise<string[]> {
      const [servers, roles] = await Promise.all([repo.list(db, tenantId), deps.rolesOf(userId)]);
      return servers.filter((s) => s.enabled && grantFor(s.access, roles) !== null).map((s) => s.name);
    },

    /** What one user may do with one server (tools, resources, prompts), with its opened credential; null: nothing (unknown, disabled, no role). */
    async grantOf(tenantId: string, userId: string, name: string): Promise<McpServerGrant | null> {
      const [s, roles] = await Promise.all([repo.find(db, tenantId, name), deps.rolesOf(userId)]);
      if (!s || !s.enabled) return null;
      const grant = grantFor(s.access, roles);
      if (grant === null) return null;
      const value = s.secretSealed ? box.open(s.secretSealed) : null;
      const credential = value === null ? null : s.authKind === 'header' && s.authHeader ? { header: s.authHeader, value } : { header: 'authorization', value: `Bearer ${value}` };
      return { name: s.name, url: s.url, credential, ...grant };
    },
  };
}

export type McpServersService = ReturnType<typeof createMcpServersService>;
