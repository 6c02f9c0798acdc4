import type { Database } from '../../db/database.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission } from '../authz.js';
import type { Ctx } from '../context.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import type { TeamsRepo } from '../teams/teams.repo.js';
import type { UsersRepo } from '../users/users.repo.js';
import { checkAccessRules, GIT_HOST_NAME_RE, normaliseBaseUrl, validRefName, type GitAccessRule } from './git-fns.js';
import type { GitHostPatch, GitHostRow, GitHostsRepo } from './git-hosts.repo.js';

/** A git host as admins see it: never its credential, only that one is set. */
export function publicGitHost(h: GitHostRow) {
  return {
    name: h.name,
    baseUrl: h.baseUrl,
    username: h.username || null,
    credential: 'sealed' as const,
    access: h.access,
    protectedRefs: h.protectedRefs,
    protectDefault: h.protectDefault,
    branchPrefix: h.branchPrefix,
    createdAt: h.createdAt,
    updatedAt: h.updatedAt,
  };
}
export type PublicGitHost = ReturnType<typeof publicGitHost>;

export interface GitHostInput {
  name: string;
  baseUrl: string;
  /** Basic authentication's user name; empty: `x-access-token` (GitHub's; GitLab and Gitea take any name with a token). */
  username?: string;
  token: string;
  access?: GitAccessRule[];
  protectedRefs?: string[];
  protectDefault?: boolean;
  branchPrefix?: string;
}

export const DEFAULT_PROTECTED_REFS = ['refs/heads/main', 'refs/heads/master'];
export const DEFAULT_BRANCH_PREFIX = 'agent/{handle}/';

/** Who an agent acts for, as the gateway needs it: the host with its credential open, and the user. */
export interface GitAgentView {
  host: GitHostRow;
  /** `Basic ...`: what the gateway sends to the host. Never leaves the control plane. */
  authorization: string;
  user: { handle: string; roles: string[]; teams: string[] };
}

/**
 * Git hosts of a tenant (issue 28): admins with admin.manage_providers (the permission that already
 * governs the tenant's other sealed service credentials: model providers, chat gateways) register them;
 * the git gateway (git-gateway.ts) reads them for each agent request.
 */
export function createGitHostsService(deps: { db: Database; repo: GitHostsRepo; users: UsersRepo; teams: TeamsRepo; audit: AuditService; box: SecretBox }) {
  const { db, repo, audit, box } = deps;
  const access = (ctx: Ctx) => requirePermission(ctx, 'admin.manage_providers');

  const checked = <T>(field: string, f: () => T): T => {
    try {
      return f();
    } catch (err) {
      throw new ValidationError((err as Error).message, { details: { field } });
    }
  };
  const checkUsername = (u: string) => {
    if (u.length > 200 || /[:\s]/.test(u)) throw new ValidationError('username must not contain ":" or spaces', { details: { field: 'username' } });
    return u;
  };
  const checkToken = (t: string) => {
    if (!t?.trim() || /[\r\n]/.test(t) || t.length > 4096) throw new ValidationError('token must be one non-empty line', { details: { field: 'token' } });
    return t;
  };
  const checkProtected = (refs: string[]) => {
    if (!Array.isArray(refs) || refs.length > 100) throw new ValidationError('protectedRefs must list at most 100 refs', { details: { field: 'protectedRefs' } });
    for (const r of refs) {
      const name = typeof r === 'string' && r.endsWith('*') ? `${r.slice(0, -1)}x` : r;
      if (typeof r !== 'string' || !validRefName(name)) throw new ValidationError(`protectedRefs: "${String(r)}" is not a ref such as refs/heads/main or refs/tags/*`, { details: { field: 'protectedRefs' } });
    }
    return refs;
  };
  const checkPrefix = (p: string) => {
    // Each user's agents get their own namespace: without {handle} one user's agent could overwrite another's branches.
    if (typeof p !== 'string' || !p.includes('{handle}') || !validRefName(`refs/heads/${p.replaceAll('{handle}', 'someone')}x`)) {
      throw new ValidationError('branchPrefix must contain {handle} and make valid branch names, e.g. agent/{handle}/', { details: { field: 'branchPrefix' } });
    }
    return p;
  };

  async function load(tenantId: string, name: string): Promise<GitHostRow> {
    const h = await repo.findByName(db, tenantId, name);
    if (!h) throw new NotFoundError(`git host "${name}" not found`, { hint: 'List them with `npx aws connector git list`.' });
    return h;
  }

  return {
    async list(ctx: Ctx): Promise<PublicGitHost[]> {
      return (await repo.list(db, access(ctx))).map(publicGitHost);
    },

    async get(ctx: Ctx, name: string): Promise<PublicGitHost> {
      return publicGitHost(await load(access(ctx), name));
    },

    async add(ctx: Ctx, input: GitHostInput): Promise<PublicGitHost> {
      const tenantId = access(ctx);
      if (typeof input.name !== 'string' || !GIT_HOST_NAME_RE.test(input.name)) throw new ValidationError('name must be lowercase letters, digits and "-" (at most 40), e.g. github', { details: { field: 'name' } });
      const row = {
        tenantId,
        name: input.name,
        baseUrl: checked('baseUrl', () => normaliseBaseUrl(input.baseUrl)),
        username: checkUsername(input.username ?? ''),
        secretSealed: box.seal(checkToken(input.token)),
        access: checked('access', () => checkAccessRules(input.access ?? [])),
        protectedRefs: checkProtected(input.protectedRefs ?? DEFAULT_PROTECTED_REFS),
        protectDefault: input.protectDefault ?? true,
        branchPrefix: checkPrefix(input.branchPrefix ?? DEFAULT_BRANCH_PREFIX),
      };
      return db.transaction(async (tx) => {
        const h = await repo.insert(tx, row);
        if (!h) throw new ConflictError(`a git host named "${input.name}" exists already`, { details: { field: 'name' } });
        await audit.record(tx, ctx, { action: 'connector.git.add', target: `git_host:${h.name}`, details: { baseUrl: h.baseUrl, access: h.access, protectedRefs: h.protectedRefs, branchPrefix: h.branchPrefix } });
        return publicGitHost(h);
      });
    },

    async update(ctx: Ctx, name: string, input: Partial<Omit<GitHostInput, 'name'>>): Promise<PublicGitHost> {
      const tenantId = access(ctx);
      const patch: GitHostPatch = {};
      if (input.baseUrl !== undefined) patch.baseUrl = checked('baseUrl', () => normaliseBaseUrl(input.baseUrl!));
      if (input.username !== undefined) patch.username = checkUsername(input.username);
      if (input.token !== undefined) patch.secretSealed = box.seal(checkToken(input.token));
      if (input.access !== undefined) patch.access = checked('access', () => checkAccessRules(input.access));
      if (input.protectedRefs !== undefined) patch.protectedRefs = checkProtected(input.protectedRefs);
      if (input.protectDefault !== undefined) patch.protectDefault = input.protectDefault;
      if (input.branchPrefix !== undefined) patch.branchPrefix = checkPrefix(input.branchPrefix);
      return db.transaction(async (tx) => {
        const h = await repo.update(tx, tenantId, name, patch);
        if (!h) throw new NotFoundError(`git host "${name}" not found`);
        const { secretSealed, ...changed } = patch;
        await audit.record(tx, ctx, { action: 'connector.git.update', target: `git_host:${h.name}`, details: { ...changed, ...(secretSealed ? { token: 'rotated' } : {}) } });
        return publicGitHost(h);
      });
    },

    async remove(ctx: Ctx, name: string): Promise<void> {
      const tenantId = access(ctx);
      await db.transaction(async (tx) => {
        if (!(await repo.remove(tx, tenantId, name))) throw new NotFoundError(`git host "${name}" not found`);
        await audit.record(tx, ctx, { action: 'connector.git.remove', target: `git_host:${name}` });
      });
    },

    /** The tenant's hosts as the sandbox's git config names them (no credentials). */
    async sandboxHosts(tenantId: string): Promise<Array<{ name: string; baseUrl: string }>> {
      return (await repo.list(db, tenantId)).map((h) => ({ name: h.name, baseUrl: h.baseUrl }));
    },

    /**
     * For the git gateway: one host of the runtime's tenant with its credential, and the runtime's user
     * (handle, roles, teams) its access rules are checked against. Null when there is no such host.
     */
    async forAgent(owner: { tenantId: string; userId: string }, name: string): Promise<GitAgentView | null> {
      if (!GIT_HOST_NAME_RE.test(name)) return null;
      const host = await repo.findByName(db, owner.tenantId, name);
      if (!host) return null;
      const [user, roles, teams] = await Promise.all([deps.users.findById(db, owner.tenantId, owner.userId), deps.users.roleNames(db, owner.userId), deps.teams.namesOf(db, owner.tenantId, owner.userId)]);
      if (!user) return null;
      const secret = box.open(host.secretSealed);
      const authorization = `Basic ${Buffer.from(`${host.username || 'x-access-token'}:${secret}`).toString('base64')}`;
      return { host, authorization, user: { handle: user.handle, roles, teams } };
    },
  };
}

export type GitHostsService = ReturnType<typeof createGitHostsService>;
