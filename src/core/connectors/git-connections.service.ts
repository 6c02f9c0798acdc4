import { createHash, randomBytes } from 'node:crypto';
import type { Database } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission, requireUser } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { ForbiddenError, NotFoundError, UpstreamError, ValidationError } from '../../kernel/errors.js';
import type { GitConnectionsRepo } from './git-connections.repo.js';
import type { GitCredentials } from './git-credentials.js';
import type { GitHostRow, GitHostsRepo } from './git-hosts.repo.js';
import { authorizeUrl, pkcePair, type TokenGrant } from './git-oauth-fns.js';

/** An authorization started in the dashboard must come back within this. */
const STATE_TTL_MS = 10 * 60_000;
/** Where hosts send people back after they allow (or refuse) the connection; registered at the host. */
export const GIT_OAUTH_CALLBACK_PATH = '/v1/connections/git/callback';

export interface MyGitConnection {
  host: string;
  baseUrl: string;
  userConnections: GitHostRow['userConnections'];
  connected: boolean;
  account: string | null;
  connectedAt: Date | null;
  expiresAt: Date | null;
  /** Why the connection's last refresh failed (its agents use the service credential or are refused until it works again). */
  problem: string | null;
}

/**
 * A person's own accounts at the tenant's git hosts: connected through the host's OAuth flow
 * (authorization code with PKCE and the host's confidential client), so that their agents act as them.
 * The person starts it signed in; the callback must come back to the same person (the state is theirs,
 * used once, ten minutes) — a link someone else started cannot connect their account to another's agents.
 * Tokens are sealed here and used only by the git gateway. Agents cannot start or end a connection.
 */
export function createGitConnectionsService(deps: {
  db: Database;
  hosts: GitHostsRepo;
  repo: GitConnectionsRepo;
  credentials: GitCredentials;
  audit: AuditService;
  box: SecretBox;
  clock: Clock;
  publicUrl: string;
}) {
  const { db, hosts, repo, audit, box, clock } = deps;
  const redirectUri = `${deps.publicUrl}${GIT_OAUTH_CALLBACK_PATH}`;
  const hashState = (state: string) => createHash('sha256').update(state).digest('hex');

  /** The person themself, signed in (not their agent: a connection is theirs to make). */
  const person = (ctx: Ctx) => {
    const actor = requireUser(ctx, 'connected accounts');
    if (actor.via === 'agent') throw new ForbiddenError("an agent cannot change its user's connected accounts");
    return actor;
  };
  async function hostOf(tenantId: string, name: string): Promise<GitHostRow> {
    const h = await hosts.findByName(db, tenantId, name);
    if (!h) throw new NotFoundError(`git host "${name}" not found`);
    return h;
  }

  return {
    redirectUri,

    /** The tenant's hosts that take per-user connections, with the person's own connection to each. */
    async mine(ctx: Ctx): Promise<MyGitConnection[]> {
      const actor = requireUser(ctx, 'connected accounts');
      const [all, mine] = await Promise.all([hosts.list(db, actor.tenantId), repo.ofUser(db, actor.tenantId, actor.userId)]);
      const byHost = new Map(mine.map((c) => [c.hostId, c]));
      return all
        .filter((h) => h.userConnections !== 'off' || byHost.has(h.id))
        .map((h) => {
          const c = byHost.get(h.id);
          return { host: h.name, baseUrl: h.baseUrl, userConnections: h.userConnections, connected: !!c, account: c ? c.account || null : null, connectedAt: c?.createdAt ?? null, expiresAt: c?.expiresAt ?? null, problem: c?.refreshError ?? null };
        });
    },

    /** Starts connecting: the URL of the host's consent page, for the person's browser. */
    async start(ctx: Ctx, hostName: string): Promise<{ authorizeUrl: string }> {
      const actor = person(ctx);
      const host = await hostOf(actor.tenantId, hostName);
      if (host.userConnections === 'off' || !host.oauth) throw new ValidationError(`${host.name} does not take per-user connections`, { details: { field: 'host' }, hint: 'An admin turns them on with an OAuth client: aws connector git update <name> --oauth-client-id ... --user-connections optional' });
      const state = randomBytes(32).toString('base64url');
      const { verifier, challenge } = pkcePair();
      await repo.insertState(db, hashState(state), { tenantId: actor.tenantId, hostId: host.id, userId: actor.userId, verifierSealed: box.seal(verifier), expiresAt: new Date(clock.now().getTime() + STATE_TTL_MS) });
      return { authorizeUrl: authorizeUrl(host.oauth, { redirectUri, state, challenge }) };
    },

    /**
     * The host's redirect back: the code redeemed (with PKCE's verifier), the account looked up, the
     * tokens sealed. The caller must be the person who started it. Returns the host's name.
     */
    async finish(ctx: Ctx, input: { state?: string; code?: string; error?: string; errorDescription?: string }): Promise<{ host: string; account: string }> {
      const actor = person(ctx);
      if (!input.state) throw new ValidationError('the host came back without a state', { details: { field: 'state' } });
      const started = await repo.takeState(db, hashState(input.state));
      if (!started || started.expiresAt.getTime() < clock.now().getTime()) throw new ValidationError('this connection was not started here or took longer than ten minutes: start it again', { details: { field: 'state' } });
      if (started.tenantId !== actor.tenantId || started.userId !== actor.userId) throw new ForbiddenError('this connection was started by someone else: start your own from Connections');
      const host = await hosts.findById(db, actor.tenantId, started.hostId);
      if (!host || host.userConnections === 'off') throw new NotFoundError('the git host no longer takes per-user connections');
      if (input.error) throw new ValidationError(`${host.name} did not connect: ${input.error.slice(0, 100)}${input.errorDescription ? ` (${input.errorDescription.slice(0, 200)})` : ''}`, { details: { field: 'error' } });
      if (!input.code) throw new ValidationError('the host came back without a code', { details: { field: 'code' } });
      let grant: TokenGrant;
      try {
        grant = await deps.credentials.tokenEndpoint(host, { grant_type: 'authorization_code', code: input.code, redirect_uri: redirectUri, code_verifier: box.open(started.verifierSealed) });
      } catch (err) {
        throw new UpstreamError(`${host.name} did not give a token: ${(err as Error).message}`);
      }
      const account = await deps.credentials.accountName(host, grant.accessToken);
      await db.transaction(async (tx) => {
        await repo.upsert(tx, {
          tenantId: actor.tenantId,
          hostId: host.id,
          userId: actor.userId,
          account,
          accessSealed: box.seal(grant.accessToken),
          refreshSealed: grant.refreshToken ? box.seal(grant.refreshToken) : null,
          expiresAt: grant.expiresAt,
          scopes: grant.scopes,
        });
        await audit.record(tx, ctx, { action: 'connector.git.connect', target: `git_host:${host.name}`, details: { account, scopes: grant.scopes, expiresAt: grant.expiresAt } });
      });
      return { host: host.name, account };
    },

    /** Ends the person's own connection (the host keeps its grant until the person revokes it there). */
    async disconnect(ctx: Ctx, hostName: string): Promise<void> {
      const actor = person(ctx);
      await removeConnection(ctx, actor.tenantId, hostName, actor.userId);
    },

    /** Admins: who has connected their account to a host. */
    async listForHost(ctx: Ctx, hostName: string) {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      const host = await hostOf(tenantId, hostName);
      return (await repo.ofHost(db, tenantId, host.id)).map((c) => ({ userId: c.userId, handle: c.handle, email: c.email, account: c.account || null, connectedAt: c.createdAt, expiresAt: c.expiresAt }));
    },

    /** Admins: ends someone's connection (they left the team, their account at the host was compromised). */
    async remove(ctx: Ctx, hostName: string, userId: string): Promise<void> {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      await removeConnection(ctx, tenantId, hostName, userId);
    },
  };

  async function removeConnection(ctx: Ctx, tenantId: string, hostName: string, userId: string): Promise<void> {
    const host = await hostOf(tenantId, hostName);
    await db.transaction(async (tx) => {
      if (!(await repo.remove(tx, tenantId, host.id, userId))) throw new NotFoundError(`no connection to ${host.name} for that person`);
      await audit.record(tx, ctx, { action: 'connector.git.disconnect', target: `git_host:${host.name}`, details: { userId } });
    });
  }
}
