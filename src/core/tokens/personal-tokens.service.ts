import type { Database } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission, tenantOf } from '../../kernel/authz.js';
import { actorString, type Ctx, type UserActor } from '../../kernel/context.js';
import { ForbiddenError, NotFoundError, UnauthenticatedError, ValidationError } from '../../kernel/errors.js';
import type { RbacService } from '../rbac/rbac.service.js';
import type { TenantsRepo } from '../tenants/tenants.repo.js';
import type { RoleAssignmentsRepo } from '../rbac/role-assignments.repo.js';
import type { UsersRepo } from '../users/users.repo.js';
import type { PersonalTokenRow, PersonalTokensRepo, TokenAuthRow } from './personal-tokens.repo.js';
import { hashToken, hourOf, maxDaysOf, newPersonalToken, scopesBeyond, TOKEN_NAME_MAX, TOKEN_SCOPES, type TokenScope } from './token-fns.js';

/** How often a token's last use is written, per token and process: not a write per request. */
const TOKEN_USE_WRITE_MS = 60_000;
const DAY_MS = 86_400_000;
const PENDING_MAX = 10_000;

export interface CreatedToken {
  token: PersonalTokenRow;
  /** The token's value: returned here only, never stored or shown again. */
  value: string;
}

export function createPersonalTokensService(deps: { db: Database; repo: PersonalTokensRepo; users: UsersRepo; assignments: RoleAssignmentsRepo; tenantsRepo: TenantsRepo; rbac: RbacService; audit: AuditService; clock: Clock }) {
  const { db, repo, users, assignments, tenantsRepo, rbac, audit, clock } = deps;
  // Requests per token since this process last wrote its use.
  const pending = new Map<string, { requests: number; firstAt: number; writtenAt: number }>();

  async function maxDays(tenantId: string): Promise<number> {
    const tenant = await tenantsRepo.findById(db, tenantId);
    return maxDaysOf(tenant?.settings ?? {});
  }

  function checkInput(input: { name: string; scopes: string[]; expiresInDays: number }, limit: number): TokenScope[] {
    const name = input.name?.trim() ?? '';
    if (!name || name.length > TOKEN_NAME_MAX) throw new ValidationError(`name: 1 to ${TOKEN_NAME_MAX} characters`, { details: { field: 'name' } });
    const scopes = [...new Set(input.scopes ?? [])];
    const unknown = scopes.filter((s) => !(TOKEN_SCOPES as readonly string[]).includes(s));
    if (!scopes.length || unknown.length) {
      throw new ValidationError(`scopes: one or more of ${TOKEN_SCOPES.join(', ')}${unknown.length ? ` (not ${unknown.join(', ')})` : ''}`, { details: { field: 'scopes' } });
    }
    if (!(typeof input.expiresInDays === 'number' && input.expiresInDays > 0 && input.expiresInDays <= limit)) {
      throw new ValidationError(`expiresInDays: more than 0 and at most ${limit} days (the tenant's maximum, settings.tokens.maxDays)`, { details: { field: 'expiresInDays', maxDays: limit } });
    }
    return TOKEN_SCOPES.filter((s) => scopes.includes(s));
  }

  async function revokeRow(ctx: Ctx, tenantId: string, row: PersonalTokenRow): Promise<PersonalTokenRow> {
    return db.transaction(async (tx) => {
      if (await repo.revoke(tx, tenantId, row.id, actorString(ctx.actor), clock.now())) {
        await audit.record(tx, { ...ctx, tenantId }, { action: 'token.revoke', target: `token:${row.id}`, userId: row.userId, details: { name: row.name, prefix: row.prefix, userId: row.userId } });
      }
      return (await repo.find(tx, tenantId, row.id))!;
    });
  }

  return {
    /** The tenant's maximum token lifetime in days (settings.tokens.maxDays, default 90): what the dashboard offers. */
    async limits(ctx: Ctx): Promise<{ maxDays: number; scopes: Array<{ scope: TokenScope; held: boolean }> }> {
      const tenantId = tenantOf(ctx);
      const held = ctx.actor.kind === 'user' ? ctx.actor.permissions : null;
      return { maxDays: await maxDays(tenantId), scopes: TOKEN_SCOPES.map((scope) => ({ scope, held: !held || scopesBeyond(held, [scope]).length === 0 })) };
    },

    /**
     * Creates a token for the calling person, or (the operator, CLI) for the user named. Refused: scopes
     * the person does not hold now (403 naming `scopes`), a lifetime over the tenant's maximum, and any
     * call made with a token (a leaked token must not mint longer-lived ones).
     */
    async create(ctx: Ctx, input: { userId?: string; name: string; scopes: string[]; expiresInDays: number }): Promise<CreatedToken> {
      if (ctx.actor.kind === 'anonymous') throw new UnauthenticatedError();
      if (ctx.actor.kind === 'user' && ctx.actor.via === 'pat') {
        throw new ForbiddenError('a personal access token cannot create tokens', { code: 'token_cannot_create_tokens', hint: 'Create tokens signed in to the dashboard, or with `npx aws token create`.' });
      }
      if (ctx.actor.kind === 'user' && (ctx.actor.via === 'agent' || ctx.actor.via === 'gateway')) {
        throw new ForbiddenError('personal access tokens are created by a signed-in person', { code: 'token_cannot_create_tokens' });
      }
      const tenantId = tenantOf(ctx);
      const userId = ctx.actor.kind === 'user' ? ctx.actor.userId : input.userId;
      if (!userId) throw new ValidationError('userId: name the user the token is for', { details: { field: 'user' } });
      const user = await users.findById(db, tenantId, userId);
      if (!user) throw new NotFoundError('user not found');
      const scopes = checkInput(input, await maxDays(tenantId));
      // What the person holds now, from their roles in the database (a signed-in token's roles may be older).
      const held = await rbac.resolvePermissions(tenantId, await assignments.roleNames(db, user.id));
      const beyond = scopesBeyond(held, scopes);
      if (beyond.length) {
        throw new ForbiddenError(`scopes: ${user.handle} does not hold ${beyond.join(', ')}`, { code: 'scope_not_held', details: { field: 'scopes', scopes: beyond } });
      }
      const now = clock.now();
      const made = newPersonalToken();
      return db.transaction(async (tx) => {
        const token = await repo.insert(tx, {
          tenantId,
          userId: user.id,
          name: input.name.trim(),
          hash: made.hash,
          prefix: made.prefix,
          scopes,
          expiresAt: new Date(now.getTime() + Math.round(input.expiresInDays * DAY_MS)),
          createdAt: now,
          createdBy: actorString(ctx.actor),
        });
        await audit.record(tx, { ...ctx, tenantId }, {
          action: 'token.create',
          target: `token:${token.id}`,
          userId: user.id,
          details: { name: token.name, prefix: token.prefix, scopes, expiresAt: token.expiresAt.toISOString(), userId: user.id },
        });
        return { token, value: made.token };
      });
    },

    /** The calling person's tokens (revoked and expired ones too), newest first. */
    async listMine(ctx: Ctx): Promise<PersonalTokenRow[]> {
      const actor = requireTokenUser(ctx);
      return repo.list(db, actor.tenantId, actor.userId);
    },

    /** Revokes one of the calling person's tokens; another person's is 404. Revoking twice is no error. */
    async revokeMine(ctx: Ctx, input: { id: string }): Promise<PersonalTokenRow> {
      const actor = requireTokenUser(ctx);
      const row = await repo.find(db, actor.tenantId, input.id);
      if (!row || row.userId !== actor.userId) throw new NotFoundError('token not found');
      return revokeRow(ctx, actor.tenantId, row);
    },

    /** Every token of the tenant, or of one user (admin.manage_users). */
    async list(ctx: Ctx, input: { userId?: string } = {}): Promise<PersonalTokenRow[]> {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      return repo.list(db, tenantId, input.userId);
    },

    /** Revokes any token of the tenant (admin.manage_users). */
    async revoke(ctx: Ctx, input: { id: string }): Promise<PersonalTokenRow> {
      const tenantId = requirePermission(ctx, 'admin.manage_users');
      const row = await repo.find(db, tenantId, input.id);
      if (!row) throw new NotFoundError('token not found');
      return revokeRow(ctx, tenantId, row);
    },

    /** The token a presented value names (by its hash), with its owner's current roles; null when unknown. */
    find(value: string): Promise<TokenAuthRow | null> {
      return repo.forAuth(db, hashToken(value));
    },

    /**
     * Counts a request made with a token. Its last use is written at most once a minute per process, and
     * with it the requests of the hour; the first write in a later hour records the earlier hour as one
     * `token.use` audit entry with its count (the summary the issue asks for, not a row per request).
     */
    async noteUse(ctx: Ctx, token: Pick<TokenAuthRow, 'id' | 'tenantId' | 'userId'>): Promise<void> {
      const now = clock.now();
      let p = pending.get(token.id);
      if (!p) {
        if (pending.size >= PENDING_MAX) pending.clear();
        pending.set(token.id, (p = { requests: 0, firstAt: now.getTime(), writtenAt: -Infinity }));
      }
      // Requests waiting from an earlier hour are written for that hour before this one is counted.
      // (That write does not restart the minute: this request's hour is written now too, which closes the
      // earlier hour and summarises it.)
      if (p.requests > 0 && hourOf(new Date(p.firstAt)).getTime() !== hourOf(now).getTime()) {
        const writtenAt = p.writtenAt;
        await write(ctx, token, p, now);
        p.writtenAt = writtenAt;
      }
      if (p.requests === 0) p.firstAt = now.getTime();
      p.requests++;
      if (now.getTime() - p.writtenAt >= TOKEN_USE_WRITE_MS) await write(ctx, token, p, now);
    },
  };

  async function write(ctx: Ctx, token: Pick<TokenAuthRow, 'id' | 'tenantId' | 'userId'>, p: { requests: number; firstAt: number; writtenAt: number }, now: Date) {
    const requests = p.requests;
    const hour = hourOf(new Date(p.firstAt));
    p.requests = 0;
    p.writtenAt = now.getTime();
    await db.transaction(async (tx) => {
      const ended = await repo.noteUse(tx, { tenantId: token.tenantId, id: token.id, requests, now, hour });
      if (ended) {
        await audit.record(tx, { ...ctx, tenantId: token.tenantId }, {
          action: 'token.use',
          target: `token:${token.id}`,
          userId: token.userId,
          details: { hour: ended.hour.toISOString(), requests: ended.count },
        });
      }
    });
  }
}

function requireTokenUser(ctx: Ctx): UserActor {
  if (ctx.actor.kind === 'anonymous') throw new UnauthenticatedError();
  if (ctx.actor.kind !== 'user') throw new ForbiddenError('personal access tokens belong to users: this needs a signed-in user', { hint: 'The operator uses `npx aws token list --user <email>`.' });
  return ctx.actor;
}

export type PersonalTokensService = ReturnType<typeof createPersonalTokensService>;
