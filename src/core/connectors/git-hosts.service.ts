import { createPrivateKey } from 'node:crypto';
import type { Database } from '../../db/database.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { checkedField, ConflictError, NotFoundError, ValidationError } from '../../kernel/errors.js';
import type { TeamsRepo } from '../teams/teams.repo.js';
import type { UsersRepo } from '../users/users.repo.js';
import type { RoleAssignmentsRepo } from '../rbac/role-assignments.repo.js';
import { checkAccessRules, checkPushOptionRules, GIT_HOST_NAME_RE, normaliseBaseUrl, validRefName, type GitAccessRule } from './git-fns.js';
import type { GitConnectionsRepo } from './git-connections.repo.js';
import type { GitCredentials } from './git-credentials.js';
import type { GitCredentialKind, GitHostPatch, GitHostRow, GitHostsRepo } from './git-hosts.repo.js';
import { checkEndpoint, githubApiUrl, OAUTH_PRESETS, oauthPreset, USER_CONNECTION_MODES, type GitOAuthClient, type OAuthPreset, type UserConnections } from './git-oauth-fns.js';

/** A git host as admins see it: never its credential, only that one is set. */
function publicGitHost(h: GitHostRow, connections = 0) {
  return {
    name: h.name,
    baseUrl: h.baseUrl,
    username: h.username || null,
    credentialKind: h.credentialKind,
    credential: h.secretSealed ? ('sealed' as const) : null,
    githubApp: h.app,
    oauth: h.oauth ? { ...h.oauth, clientSecret: 'sealed' as const } : null,
    userConnections: h.userConnections,
    connections,
    access: h.access,
    protectedRefs: h.protectedRefs,
    protectDefault: h.protectDefault,
    branchPrefix: h.branchPrefix,
    pushOptions: h.pushOptions,
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
  /** token (default), github_app, or none (every agent acts as its own user: userConnections required). */
  credentialKind?: GitCredentialKind;
  /** The service token (credentialKind token). */
  token?: string;
  /** A GitHub App installation (credentialKind github_app); apiUrl defaults from baseUrl. */
  githubApp?: { appId: string; installationId: string; privateKey?: string; apiUrl?: string };
  /** The host's OAuth client for per-user connections (null removes it); a preset fills the endpoints. */
  oauth?: { preset?: OAuthPreset; clientId: string; clientSecret?: string; authorizeUrl?: string; tokenUrl?: string; userUrl?: string; scopes?: string } | null;
  userConnections?: UserConnections;
  access?: GitAccessRule[];
  protectedRefs?: string[];
  protectDefault?: boolean;
  branchPrefix?: string;
  /** Push options agents may send (`git push -o`): keys, prefixes ending in `*`, or key=value; default none. */
  pushOptions?: string[];
}

const DEFAULT_PROTECTED_REFS = ['refs/heads/main', 'refs/heads/master'];
const DEFAULT_BRANCH_PREFIX = 'agent/{handle}/';

/** Who an agent acts for, as the gateway needs it: the host with its credential open, and the user. */
export interface GitAgentView {
  host: GitHostRow;
  /** `Basic ...`: what the gateway sends to the host. Never leaves the control plane. */
  authorization: string;
  /**
   * Whose identity the host sees: the service credential's, or the person's own account there. `fallback`:
   * why the service's stands in for a connection the person has (its refresh failed; optional mode).
   */
  as: { kind: 'service'; fallback?: string } | { kind: 'user'; account: string };
  user: { handle: string; roles: string[]; teams: string[] };
}

/**
 * Git hosts of a tenant: admins with admin.manage_providers (the permission that already
 * governs the tenant's other sealed service credentials: model providers, chat gateways) register them;
 * the git gateway (git-gateway.ts) reads them for each agent request.
 */
export function createGitHostsService(deps: {
  db: Database;
  repo: GitHostsRepo;
  connections: GitConnectionsRepo;
  credentials: GitCredentials;
  users: UsersRepo;
  assignments: RoleAssignmentsRepo;
  teams: TeamsRepo;
  audit: AuditService;
  box: SecretBox;
  /** The tenant's hosts (names, base URLs) changed: running runtimes take their new git config (best effort). */
  changed?: (tenantId: string) => void;
}) {
  const { db, repo, audit, box } = deps;
  const access = (ctx: Ctx) => requirePermission(ctx, 'admin.manage_providers');

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

  const checkSecret = (field: string, v: string | undefined, max = 4096) => {
    if (typeof v !== 'string' || !v.trim() || v.length > max) throw new ValidationError(`${field} must not be empty`, { details: { field } });
    return v;
  };
  const checkId = (field: string, v: unknown) => {
    if (typeof v !== 'string' || !/^[0-9A-Za-z._-]{1,100}$/.test(v)) throw new ValidationError(`${field} must be the numeric id (or client id) GitHub shows`, { details: { field } });
    return v;
  };
  /** The GitHub App as stored; its private key, when given, checked to be one (a key that cannot sign fails every clone). */
  const checkApp = (app: NonNullable<GitHostInput['githubApp']>, baseUrl: string, keyRequired: boolean) => {
    if (keyRequired || app.privateKey !== undefined) {
      const pem = checkSecret('githubApp.privateKey', app.privateKey, 20_000);
      try {
        createPrivateKey(pem);
      } catch {
        throw new ValidationError('githubApp.privateKey is not a PEM private key (the .pem file GitHub gives for the app)', { details: { field: 'githubApp.privateKey' } });
      }
    }
    return {
      appId: checkId('githubApp.appId', app.appId),
      installationId: checkId('githubApp.installationId', app.installationId),
      apiUrl: checkedField('githubApp.apiUrl', () => checkEndpoint('githubApp.apiUrl', app.apiUrl ?? githubApiUrl(baseUrl))).replace(/\/+$/, ''),
    };
  };
  const checkOAuth = (o: NonNullable<GitHostInput['oauth']>, baseUrl: string): GitOAuthClient => {
    if (o.preset !== undefined && !OAUTH_PRESETS.includes(o.preset)) throw new ValidationError(`oauth.preset must be one of ${OAUTH_PRESETS.join(', ')}`, { details: { field: 'oauth.preset' } });
    const preset = o.preset ? oauthPreset(o.preset, baseUrl) : null;
    const endpoint = (field: 'authorizeUrl' | 'tokenUrl') => {
      const v = o[field] ?? preset?.[field];
      if (!v) throw new ValidationError(`oauth.${field} is needed (or oauth.preset: ${OAUTH_PRESETS.join(', ')})`, { details: { field: `oauth.${field}` } });
      return checkedField(`oauth.${field}`, () => checkEndpoint(`oauth.${field}`, v));
    };
    const userUrl = o.userUrl ?? preset?.userUrl ?? '';
    const scopes = o.scopes ?? preset?.scopes ?? '';
    if (scopes.length > 500 || /[\r\n]/.test(scopes)) throw new ValidationError('oauth.scopes must be one line', { details: { field: 'oauth.scopes' } });
    return {
      clientId: checkId('oauth.clientId', o.clientId),
      authorizeUrl: endpoint('authorizeUrl'),
      tokenUrl: endpoint('tokenUrl'),
      userUrl: userUrl ? checkedField('oauth.userUrl', () => checkEndpoint('oauth.userUrl', userUrl)) : '',
      scopes,
    };
  };
  const checkMode = (m: unknown): UserConnections => {
    if (!USER_CONNECTION_MODES.includes(m as UserConnections)) throw new ValidationError(`userConnections must be one of ${USER_CONNECTION_MODES.join(', ')}`, { details: { field: 'userConnections' } });
    return m as UserConnections;
  };
  /** A host's credentials must add up: a service credential or required per-user connections, and an OAuth client for those. */
  const checkCoherent = (h: Pick<GitHostRow, 'credentialKind' | 'secretSealed' | 'app' | 'oauth' | 'oauthSecretSealed' | 'userConnections'>) => {
    if (h.credentialKind === 'token' && !h.secretSealed) throw new ValidationError('token is needed (or credentialKind none with userConnections required)', { details: { field: 'token' } });
    if (h.credentialKind === 'github_app' && (!h.app || !h.secretSealed)) throw new ValidationError('githubApp with appId, installationId and privateKey is needed for credentialKind github_app', { details: { field: 'githubApp' } });
    if (h.userConnections !== 'off' && (!h.oauth || !h.oauthSecretSealed)) throw new ValidationError('per-user connections need the host\'s OAuth client: oauth with clientId and clientSecret', { details: { field: 'oauth' } });
    if (h.credentialKind === 'none' && h.userConnections !== 'required') throw new ValidationError('a host without a service credential needs userConnections required', { details: { field: 'userConnections' } });
  };

  async function load(tenantId: string, name: string): Promise<GitHostRow> {
    const h = await repo.findByName(db, tenantId, name);
    if (!h) throw new NotFoundError(`git host "${name}" not found`, { hint: 'List them with `npx aws connector git list`.' });
    return h;
  }

  return {
    async list(ctx: Ctx): Promise<PublicGitHost[]> {
      const tenantId = access(ctx);
      const [hosts, counts] = await Promise.all([repo.list(db, tenantId), deps.connections.countByHost(db, tenantId)]);
      return hosts.map((h) => publicGitHost(h, counts.get(h.id) ?? 0));
    },

    async get(ctx: Ctx, name: string): Promise<PublicGitHost> {
      const h = await load(access(ctx), name);
      return publicGitHost(h, (await deps.connections.countByHost(db, h.tenantId)).get(h.id) ?? 0);
    },

    async add(ctx: Ctx, input: GitHostInput): Promise<PublicGitHost> {
      const tenantId = access(ctx);
      if (typeof input.name !== 'string' || !GIT_HOST_NAME_RE.test(input.name)) throw new ValidationError('name must be lowercase letters, digits and "-" (at most 40), e.g. github', { details: { field: 'name' } });
      const baseUrl = checkedField('baseUrl', () => normaliseBaseUrl(input.baseUrl));
      const credentialKind: GitCredentialKind = input.credentialKind ?? (input.githubApp ? 'github_app' : 'token');
      if (!['token', 'github_app', 'none'].includes(credentialKind)) throw new ValidationError('credentialKind must be token, github_app or none', { details: { field: 'credentialKind' } });
      const row = {
        tenantId,
        name: input.name,
        baseUrl,
        username: checkUsername(input.username ?? ''),
        credentialKind,
        secretSealed:
          credentialKind === 'token' && input.token !== undefined ? box.seal(checkToken(input.token))
          : credentialKind === 'github_app' && input.githubApp?.privateKey !== undefined ? box.seal(checkSecret('githubApp.privateKey', input.githubApp.privateKey, 20_000))
          : null,
        app: credentialKind === 'github_app' && input.githubApp ? checkApp(input.githubApp, baseUrl, true) : null,
        oauth: input.oauth ? checkOAuth(input.oauth, baseUrl) : null,
        oauthSecretSealed: input.oauth?.clientSecret !== undefined ? box.seal(checkSecret('oauth.clientSecret', input.oauth.clientSecret)) : null,
        userConnections: checkMode(input.userConnections ?? 'off'),
        access: checkedField('access', () => checkAccessRules(input.access ?? [])),
        protectedRefs: checkProtected(input.protectedRefs ?? DEFAULT_PROTECTED_REFS),
        protectDefault: input.protectDefault ?? true,
        branchPrefix: checkPrefix(input.branchPrefix ?? DEFAULT_BRANCH_PREFIX),
        pushOptions: checkedField('pushOptions', () => checkPushOptionRules(input.pushOptions ?? [])),
      };
      checkCoherent(row);
      const added = await db.transaction(async (tx) => {
        const h = await repo.insert(tx, row);
        if (!h) throw new ConflictError(`a git host named "${input.name}" exists already`, { details: { field: 'name' } });
        await audit.record(tx, ctx, {
          action: 'connector.git.add',
          target: `git_host:${h.name}`,
          details: { baseUrl: h.baseUrl, credentialKind: h.credentialKind, githubApp: h.app, oauthClientId: h.oauth?.clientId ?? null, userConnections: h.userConnections, access: h.access, protectedRefs: h.protectedRefs, branchPrefix: h.branchPrefix, pushOptions: h.pushOptions },
        });
        return publicGitHost(h);
      });
      deps.changed?.(tenantId);
      return added;
    },

    async update(ctx: Ctx, name: string, input: Partial<Omit<GitHostInput, 'name'>>): Promise<PublicGitHost> {
      const tenantId = access(ctx);
      const updated = await db.transaction(async (tx) => {
        const current = await repo.findForUpdate(tx, tenantId, name);
        if (!current) throw new NotFoundError(`git host "${name}" not found`);
        const patch: GitHostPatch = {};
        if (input.baseUrl !== undefined) patch.baseUrl = checkedField('baseUrl', () => normaliseBaseUrl(input.baseUrl!));
        const baseUrl = patch.baseUrl ?? current.baseUrl;
        if (input.username !== undefined) patch.username = checkUsername(input.username);
        if (input.credentialKind !== undefined) {
          if (!['token', 'github_app', 'none'].includes(input.credentialKind)) throw new ValidationError('credentialKind must be token, github_app or none', { details: { field: 'credentialKind' } });
          patch.credentialKind = input.credentialKind;
          // A credential of another kind is not kept: a token must not be read as a private key.
          if (input.credentialKind !== current.credentialKind) patch.secretSealed = null;
          if (input.credentialKind !== 'github_app') patch.app = null;
        }
        const kind = patch.credentialKind ?? current.credentialKind;
        if (input.token !== undefined) {
          if (kind !== 'token') throw new ValidationError('token is the credential of credentialKind token', { details: { field: 'token' } });
          patch.secretSealed = box.seal(checkToken(input.token));
        }
        if (input.githubApp !== undefined) {
          if (kind !== 'github_app') throw new ValidationError('githubApp goes with credentialKind github_app', { details: { field: 'githubApp' } });
          patch.app = checkApp(input.githubApp, baseUrl, false);
          if (input.githubApp.privateKey !== undefined) patch.secretSealed = box.seal(input.githubApp.privateKey);
        }
        if (input.oauth !== undefined) {
          patch.oauth = input.oauth ? checkOAuth(input.oauth, baseUrl) : null;
          if (input.oauth === null) patch.oauthSecretSealed = null;
          else if (input.oauth.clientSecret !== undefined) patch.oauthSecretSealed = box.seal(checkSecret('oauth.clientSecret', input.oauth.clientSecret));
        }
        if (input.userConnections !== undefined) patch.userConnections = checkMode(input.userConnections);
        if (input.access !== undefined) patch.access = checkedField('access', () => checkAccessRules(input.access));
        if (input.protectedRefs !== undefined) patch.protectedRefs = checkProtected(input.protectedRefs);
        if (input.protectDefault !== undefined) patch.protectDefault = input.protectDefault;
        if (input.branchPrefix !== undefined) patch.branchPrefix = checkPrefix(input.branchPrefix);
        if (input.pushOptions !== undefined) patch.pushOptions = checkedField('pushOptions', () => checkPushOptionRules(input.pushOptions));
        checkCoherent({ ...current, ...patch });
        const h = (await repo.update(tx, tenantId, name, patch))!;
        deps.credentials.forget(h.id);
        const { secretSealed, oauthSecretSealed, ...changed } = patch;
        await audit.record(tx, ctx, {
          action: 'connector.git.update',
          target: `git_host:${h.name}`,
          details: { ...changed, ...(secretSealed ? { [kind === 'github_app' ? 'privateKey' : 'token']: 'rotated' } : {}), ...(oauthSecretSealed ? { oauthClientSecret: 'rotated' } : {}) },
        });
        return publicGitHost(h, (await deps.connections.countByHost(tx, tenantId)).get(h.id) ?? 0);
      });
      if (input.baseUrl !== undefined) deps.changed?.(tenantId);
      return updated;
    },

    async remove(ctx: Ctx, name: string): Promise<void> {
      const tenantId = access(ctx);
      await db.transaction(async (tx) => {
        if (!(await repo.remove(tx, tenantId, name))) throw new NotFoundError(`git host "${name}" not found`);
        await audit.record(tx, ctx, { action: 'connector.git.remove', target: `git_host:${name}` });
      });
      deps.changed?.(tenantId);
    },

    /** The tenant's hosts as the sandbox's git config names them (no credentials). */
    async sandboxHosts(tenantId: string): Promise<Array<{ name: string; baseUrl: string }>> {
      return (await repo.list(db, tenantId)).map((h) => ({ name: h.name, baseUrl: h.baseUrl }));
    },

    /**
     * For the git gateway: one host of the runtime's tenant with its credential, and the runtime's user
     * (handle, roles, teams) its access rules are checked against. Null when there is no such host.
     */
    async forAgent(owner: { tenantId: string; userId: string }, name: string): Promise<GitAgentView | { host: GitHostRow; refused: string } | null> {
      if (!GIT_HOST_NAME_RE.test(name)) return null;
      const host = await repo.findByName(db, owner.tenantId, name);
      if (!host) return null;
      const [user, roles, teams] = await Promise.all([deps.users.findById(db, owner.tenantId, owner.userId), deps.assignments.roleNames(db, owner.userId), deps.teams.namesOf(db, owner.tenantId, owner.userId)]);
      if (!user) return null;
      const credential = await deps.credentials.forAgent(host, owner.userId);
      if ('refused' in credential) return { host, refused: credential.refused };
      const as = credential.as === 'user' ? { kind: 'user' as const, account: credential.account } : { kind: 'service' as const, ...(credential.fallback ? { fallback: credential.fallback } : {}) };
      return { host, authorization: credential.authorization, as, user: { handle: user.handle, roles, teams } };
    },
  };
}

export type GitHostsService = ReturnType<typeof createGitHostsService>;
