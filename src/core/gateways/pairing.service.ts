import { randomInt } from 'node:crypto';
import type { Database, Tx } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { AuditService } from '../audit/audit.service.js';
import type { Ctx, UserActor } from '../context.js';
import { AppError, NotFoundError, RateLimitedError, UnauthenticatedError } from '../errors.js';
import type { EventBus } from '../events.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { Logger } from '../logger.js';
import type { RbacPermissions } from '../rbac/permissions.js';
import type { SessionsService } from '../sessions/sessions.service.js';
import type { SessionsRepo } from '../sessions/sessions.repo.js';
import { CODE, PENDING, type GatewayRow, type GatewaysRepo, type PairingCodeRow } from './gateways.repo.js';
import type { ChatPlatform, GatewayKind, InboundMessage } from './platforms.js';

/** What peers do (DESIGN.md 8): an alphabet without look-alikes, 8 characters, an hour to approve. */
export const CODE_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';
export const CODE_LENGTH = 8;
export const CODE_TTL_MS = 60 * 60_000;
export const MAX_PENDING_PER_GATEWAY = 3;
export const NEW_CODE_INTERVAL_MS = 10 * 60_000;
/** A pending code is sent again to a user who writes again, at most this often. */
export const RESEND_INTERVAL_MS = 60_000;
/** Failed approvals of one gateway allowed per window before approvals are refused (guessing codes). */
export const MAX_FAILED_APPROVALS = 10;
export const FAILED_APPROVAL_WINDOW_MS = 10 * 60_000;

export const GATEWAY_EVENTS_CHANNEL = 'gateways.events';
export const GATEWAY_SEND_JOB = 'gateway-send';
export const GATEWAY_REPLY_JOB = 'gateway-reply';

export interface GatewayEvent {
  gatewayId: string;
  type: 'pairing.code_created' | 'pairing.code_approved';
  /** The external user id, for approvals. */
  userId?: string;
  /** The approved code's id (streams use it not to announce one approval twice). */
  codeId?: string;
}

export function publicCode(c: PairingCodeRow) {
  return {
    id: c.id,
    gatewayId: c.gatewayId,
    code: c.code,
    externalUserId: c.externalUserId,
    externalUserName: c.externalUserName,
    expiresAt: c.expiresAt,
    createdAt: c.createdAt,
    consumedAt: c.consumedAt,
  };
}

function newCode(): string {
  let s = '';
  for (let i = 0; i < CODE_LENGTH; i++) s += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)];
  return s;
}

/** Normalises what an operator types: case, spaces and dashes do not matter. */
export function normaliseCode(input: string): string {
  return input.toUpperCase().replace(/[\s-]/g, '').slice(0, 32);
}

export function createPairingService(deps: {
  db: Database;
  repo: GatewaysRepo;
  sessionsRepo: SessionsRepo;
  sessions: SessionsService;
  audit: AuditService;
  bus: EventBus;
  queue: JobQueue;
  box: SecretBox;
  clock: Clock;
  log: Logger;
  platforms: Record<GatewayKind, ChatPlatform>;
  access: (ctx: Ctx) => string;
  loadGateway: (ctx: Ctx, id: string) => Promise<GatewayRow>;
  actorOf: (tenantId: string, userId: string) => Promise<{ roles: string[]; permissions: RbacPermissions }>;
}) {
  const { db, repo, audit, bus, queue, box, clock } = deps;
  // The webhook route is hot and public: gateways (with their opened secret) are cached briefly.
  const cache = new Map<string, { at: number; g: (GatewayRow & { secret: string | null }) | null }>();

  async function gatewayForWebhook(id: string) {
    const hit = cache.get(id);
    if (hit && Date.now() - hit.at < 5000) return hit.g;
    const row = /^[0-9a-f-]{36}$/i.test(id) ? await repo.findById(db, id) : null;
    const g = row ? { ...row, secret: row.webhookSecretSealed ? box.open(row.webhookSecretSealed) : null } : null;
    if (cache.size > 10_000) cache.clear();
    cache.set(id, { at: Date.now(), g });
    return g;
  }

  const send = (tx: Tx, gatewayId: string, chatId: string, text: string) => queue.send(GATEWAY_SEND_JOB, { gatewayId, chatId, text }, { tx, retryLimit: 5 });

  /** Issues (or repeats) a pairing code for an unpaired chat user, within the limits of DESIGN.md 8. */
  async function requestPairing(g: GatewayRow, msg: InboundMessage): Promise<'issued' | 'repeated' | 'limited'> {
    const now = clock.now();
    // The common case under a retry storm: the user already has a pending code. Answer without the
    // gateway lock, and send the code again at most once a minute.
    const resent = await repeatPending(g, msg, now);
    if (resent) return 'repeated';
    return db.transaction(async (tx) => {
      // One request at a time per gateway, so the pending limit and the per-user rule hold under races.
      await tx.query(`select pg_advisory_xact_lock(hashtext($1))`, [g.id]);
      const { rows: open } = await tx.query<PairingCodeRow>(
        `select ${CODE} from pairing_codes c where c.gateway_id = $1 and c.external_user_id = $2 and ${PENDING.replace('$now', '$3')} limit 1`,
        [g.id, msg.externalUserId, now],
      );
      if (open[0]) {
        // A retry never replaces the code the user already has (it appeared since the check above).
        return 'repeated';
      }
      // One new code per user per 10 minutes (a denied or expired one counts; a used one does not, so a
      // user who was unpaired can pair again at once).
      const { rows: recent } = await tx.query(
        `select 1 from pairing_codes c where c.gateway_id = $1 and c.external_user_id = $2 and c.consumed_at is null and c.created_at > $3 limit 1`,
        [g.id, msg.externalUserId, new Date(now.getTime() - NEW_CODE_INTERVAL_MS)],
      );
      if (recent.length) {
        await send(tx, g.id, msg.chatId, 'A pairing request from you was made a few minutes ago. Please try again later.');
        return 'limited';
      }
      const { rows: pending } = await tx.query<{ n: number }>(
        `select count(*)::int as n from pairing_codes c where c.gateway_id = $1 and ${PENDING.replace('$now', '$2')}`,
        [g.id, now],
      );
      if (pending[0].n >= MAX_PENDING_PER_GATEWAY) {
        await send(tx, g.id, msg.chatId, 'There are too many pairing requests waiting for approval. Please try again later.');
        return 'limited';
      }
      // Expired codes give their code back to the pool of unused ones.
      await tx.query(`update pairing_codes set denied_at = $1 where expires_at <= $1 and consumed_at is null and denied_at is null`, [now]);
      for (let attempt = 0; ; attempt++) {
        const code = newCode();
        const { rows } = await tx.query<{ id: string }>(
          `insert into pairing_codes (gateway_id, code, external_user_id, external_user_name, platform_display_name, chat_id, expires_at, created_at, last_sent_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $8) on conflict (code) where consumed_at is null and denied_at is null do nothing returning id`,
          [g.id, code, msg.externalUserId, msg.externalUserName, msg.platformDisplayName, msg.chatId, new Date(now.getTime() + CODE_TTL_MS), now],
        );
        if (rows[0]) {
          await send(tx, g.id, msg.chatId, codeMessage(code));
          await audit.record(tx, systemCtxFor(g, deps.log), { action: 'pairing.request', target: `gateway:${g.id}`, details: { codeId: rows[0].id, externalUserId: msg.externalUserId, externalUserName: msg.externalUserName } });
          await bus.publish(GATEWAY_EVENTS_CHANNEL, { gatewayId: g.id, type: 'pairing.code_created' } satisfies GatewayEvent, tx);
          return 'issued';
        }
        if (attempt > 5) throw new Error('could not find an unused pairing code');
      }
    });
  }

  /** True when the user has a pending code: it is sent again unless it was sent within the last minute. */
  async function repeatPending(g: GatewayRow, msg: InboundMessage, now: Date): Promise<boolean> {
    const { rows } = await db.hot<{ id: string; code: string; due: boolean }>(
      'pairing.open-code',
      `select c.id, c.code, (c.last_sent_at is null or c.last_sent_at <= $4) as due from pairing_codes c
        where c.gateway_id = $1 and c.external_user_id = $2 and ${PENDING.replace('$now', '$3')} limit 1`,
      [g.id, msg.externalUserId, now, new Date(now.getTime() - RESEND_INTERVAL_MS)],
    );
    const open = rows[0];
    if (!open) return false;
    if (!open.due) return true;
    await db.transaction(async (tx) => {
      // Only one of several concurrent retries wins the right to send.
      const { rowCount } = await tx.query(`update pairing_codes set last_sent_at = $2 where id = $1 and (last_sent_at is null or last_sent_at <= $3)`, [open.id, now, new Date(now.getTime() - RESEND_INTERVAL_MS)]);
      if (rowCount) await send(tx, g.id, msg.chatId, codeMessage(open.code));
    });
    return true;
  }

  /** A paired user's message goes to their agent session, owned by the gateway's service user. */
  async function relay(g: GatewayRow, msg: InboundMessage, pairedId: string, sessionId: string | null): Promise<void> {
    const { roles, permissions } = await deps.actorOf(g.tenantId, g.serviceUserId);
    const actor: UserActor = { kind: 'user', userId: g.serviceUserId, tenantId: g.tenantId, roles, permissions, via: 'gateway' };
    const ctx: Ctx = { tenantId: g.tenantId, actor, requestId: crypto.randomUUID(), log: deps.log, channel: g.kind };
    let id = sessionId && (await deps.sessionsRepo.byId(db, sessionId))?.id;
    if (!id) {
      id = (await deps.sessions.create(ctx, { title: `${g.kind}: ${msg.externalUserName || msg.platformDisplayName || msg.externalUserId}` })).sessionId;
      await db.query(`update paired_users set session_id = $2 where id = $1`, [pairedId, id]);
    }
    try {
      await deps.sessions.prompt(ctx, { id, text: msg.text });
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500) throw err;
      // Not ready, over budget, empty: tell the chat user rather than leave them waiting.
      await db.transaction((tx) => send(tx, g.id, msg.chatId, `Sorry, the agent cannot take this message: ${err.message}`));
    }
  }

  async function failedApprovals(tx: Tx, g: GatewayRow, now: Date): Promise<number> {
    const { rows } = await tx.query<{ n: number }>(
      `select count(*)::int as n from audit_log where tenant_id = $1 and action = 'pairing.approve_failed' and target = $2 and ts > $3`,
      [g.tenantId, `gateway:${g.id}`, new Date(now.getTime() - FAILED_APPROVAL_WINDOW_MS)],
    );
    return rows[0].n;
  }

  return {
    /**
     * The platform's webhook (public): verified with the gateway's webhook secret in constant time; a
     * wrong or missing secret is 401 and nothing is stored. A disabled gateway ignores traffic (200, so
     * the platform does not retry). Unpaired users get a pairing code; paired users reach their agent.
     */
    async receive(input: { gatewayId: string; headers: Record<string, string | string[] | undefined>; rawBody: Buffer }): Promise<{ ok: true; outcome: string }> {
      const g = await gatewayForWebhook(input.gatewayId);
      if (!g || !g.secret) throw new UnauthenticatedError('unknown gateway or no webhook registered');
      const platform = deps.platforms[g.kind];
      if (!platform.verify({ headers: input.headers, rawBody: input.rawBody, secret: g.secret })) throw new UnauthenticatedError('webhook signature does not match');
      if (!g.enabled) return { ok: true, outcome: 'ignored (gateway disabled)' };
      let body: unknown;
      try {
        body = JSON.parse(input.rawBody.toString('utf8'));
      } catch {
        return { ok: true, outcome: 'ignored (not JSON)' };
      }
      const msg = platform.parse(body);
      if (!msg) return { ok: true, outcome: 'ignored (not a text message)' };
      const { rows } = await db.hot<{ id: string; sessionId: string | null }>(
        'pairing.paired-user',
        `select id, session_id as "sessionId" from paired_users where gateway_id = $1 and external_user_id = $2`,
        [g.id, msg.externalUserId],
      );
      const paired = rows[0];
      if (paired) {
        await relay(g, msg, paired.id, paired.sessionId);
        return { ok: true, outcome: 'relayed' };
      }
      return { ok: true, outcome: await requestPairing(g, msg) };
    },

    /** Pending codes (unexpired, unconsumed) of one gateway. */
    async listCodes(ctx: Ctx, gatewayId: string) {
      const g = await deps.loadGateway(ctx, gatewayId);
      return (await repo.pendingCodes(db, g.id, null, clock.now())).map(publicCode);
    },

    /** Pending codes of every gateway of the tenant, with the gateway they belong to (for `aws pair`). */
    async listAllCodes(ctx: Ctx) {
      const tenantId = deps.access(ctx);
      return (await repo.pendingCodes(db, null, tenantId, clock.now())).map((c) => ({ ...publicCode(c), gatewayKind: c.gatewayKind, botUsername: c.botUsername }));
    },

    /**
     * Approves a pending code (SPEC.md Pairing code): consumed and paired user created in one
     * transaction, audited, `pairing.code_approved` pushed to every process. Unknown, expired or used
     * codes are 404; too many failures on a gateway are 429 for a while (codes cannot be guessed).
     * Without a gateway id (CLI), the code alone names it.
     */
    async approve(ctx: Ctx, input: { gatewayId?: string; code: string }) {
      const tenantId = deps.access(ctx);
      const code = normaliseCode(input.code);
      const now = clock.now();
      let g: GatewayRow;
      if (input.gatewayId) g = await deps.loadGateway(ctx, input.gatewayId);
      else {
        const { rows } = await db.query<{ gatewayId: string }>(
          `select c.gateway_id as "gatewayId" from pairing_codes c join gateways g on g.id = c.gateway_id where g.tenant_id = $1 and c.code = $2 and ${PENDING.replace('$now', '$3')}`,
          [tenantId, code, now],
        );
        if (!rows[0]) throw new NotFoundError('pairing code not found or expired');
        g = await deps.loadGateway(ctx, rows[0].gatewayId);
      }
      const result = await db.transaction(async (tx) => {
        if ((await failedApprovals(tx, g, now)) >= MAX_FAILED_APPROVALS) {
          throw new RateLimitedError('too many failed approvals for this gateway; try again in a few minutes', { details: { windowMinutes: FAILED_APPROVAL_WINDOW_MS / 60_000 } });
        }
        const { rows } = await tx.query<PairingCodeRow>(
          `update pairing_codes c set consumed_at = $3 where c.gateway_id = $1 and c.code = $2 and ${PENDING.replace('$now', '$3')} returning ${CODE}`,
          [g.id, code, now],
        );
        const c = rows[0];
        if (!c) return null;
        await tx.query(
          `insert into paired_users (gateway_id, external_user_id, external_user_name, platform_display_name, chat_id, approved_by)
           values ($1, $2, $3, $4, $5, $6)
           on conflict (gateway_id, external_user_id) do update set external_user_name = excluded.external_user_name, chat_id = excluded.chat_id, paired_at = now()`,
          [g.id, c.externalUserId, c.externalUserName, c.platformDisplayName, c.chatId, ctx.actor.kind === 'user' ? `user:${ctx.actor.userId}` : `system:${ctx.actor.kind === 'system' ? ctx.actor.name : 'anonymous'}`],
        );
        await audit.record(tx, { ...ctx, tenantId: g.tenantId }, { action: 'pairing.approve', target: `gateway:${g.id}`, details: { codeId: c.id, externalUserId: c.externalUserId, externalUserName: c.externalUserName } });
        await send(tx, g.id, c.chatId, 'You are paired. Send a message to talk to the agent.');
        await bus.publish(GATEWAY_EVENTS_CHANNEL, { gatewayId: g.id, type: 'pairing.code_approved', userId: c.externalUserId, codeId: c.id } satisfies GatewayEvent, tx);
        return c;
      });
      if (!result) {
        // Recorded outside the failed transaction's scope so that it counts towards the limit.
        await db.transaction((tx) => audit.record(tx, { ...ctx, tenantId: g.tenantId }, { action: 'pairing.approve_failed', target: `gateway:${g.id}`, details: {} }));
        throw new NotFoundError('pairing code not found or expired');
      }
      return { ok: true as const, gatewayId: g.id, user: { externalUserId: result.externalUserId, externalUserName: result.externalUserName } };
    },

    /** Deletes a pending code; no paired user is created. */
    async deny(ctx: Ctx, input: { gatewayId?: string; code: string }): Promise<void> {
      const tenantId = deps.access(ctx);
      const code = normaliseCode(input.code);
      const now = clock.now();
      await db.transaction(async (tx) => {
        const { rows } = await tx.query<{ id: string; gatewayId: string; externalUserId: string }>(
          `update pairing_codes c set denied_at = $3 from gateways g
            where g.id = c.gateway_id and g.tenant_id = $1 and c.code = $2 and ($4::uuid is null or c.gateway_id = $4) and ${PENDING.replace('$now', '$3')}
            returning c.id, c.gateway_id as "gatewayId", c.external_user_id as "externalUserId"`,
          [tenantId, code, now, input.gatewayId ?? null],
        );
        if (!rows[0]) throw new NotFoundError('pairing code not found or expired');
        await audit.record(tx, { ...ctx, tenantId }, { action: 'pairing.deny', target: `gateway:${rows[0].gatewayId}`, details: { codeId: rows[0].id, externalUserId: rows[0].externalUserId } });
      });
    },

    async pairedUsers(ctx: Ctx, gatewayId: string) {
      const g = await deps.loadGateway(ctx, gatewayId);
      return (await repo.pairedUsers(db, g.id)).map((p) => ({ id: p.id, gatewayId: p.gatewayId, externalUserId: p.externalUserId, externalUserName: p.externalUserName, platformDisplayName: p.platformDisplayName, pairedAt: p.pairedAt }));
    },

    /** Unpairs a chat user: their next message starts pairing again. */
    async revoke(ctx: Ctx, input: { gatewayId: string; externalUserId: string }): Promise<void> {
      const g = await deps.loadGateway(ctx, input.gatewayId);
      await db.transaction(async (tx) => {
        const { rowCount } = await tx.query(`delete from paired_users where gateway_id = $1 and external_user_id = $2`, [g.id, input.externalUserId]);
        if (!rowCount) throw new NotFoundError('paired user not found');
        await audit.record(tx, ctx, { action: 'pairing.revoke', target: `gateway:${g.id}`, details: { externalUserId: input.externalUserId } });
      });
    },

    /**
     * Codes of a gateway approved since a moment, for the gateway stream's poll: approvals made by a
     * process whose events cannot reach this one (the embedded database has no cross-process bus).
     */
    async approvedSince(gatewayId: string, since: Date) {
      const { rows } = await db.query<{ codeId: string; userId: string }>(
        `select c.id as "codeId", c.external_user_id as "userId" from pairing_codes c where c.gateway_id = $1 and c.consumed_at > $2 order by c.consumed_at`,
        [gatewayId, since],
      );
      return rows;
    },

    /** Pending codes for the gateway stream's poll (access checked when the stream opened). */
    async pendingForStream(gatewayId: string) {
      return (await repo.pendingCodes(db, gatewayId, null, clock.now())).map(publicCode);
    },

    /** The gateway-send job: one message to a chat through the platform. */
    async sendJob(_ctx: Ctx, data: { gatewayId: string; chatId: string; text: string }): Promise<void> {
      const g = await repo.findById(db, data.gatewayId);
      if (!g) return; // deleted meanwhile
      await deps.platforms[g.kind].sendMessage({ botToken: box.open(g.botTokenSealed), botId: g.botId, chatId: data.chatId, text: data.text });
    },

    /** The gateway-reply job: at the end of a turn, sends the agent's answer back to the chat, once. */
    async replyJob(ctx: Ctx, data: { sessionId: string }): Promise<void> {
      const paired = await repo.pairedUserBySession(db, data.sessionId);
      if (!paired) return;
      const g = await repo.findById(db, paired.gatewayId);
      if (!g) return;
      const answer = await deps.sessions.lastAnswer(ctx, { id: data.sessionId });
      if (!answer || !answer.text.trim()) return;
      const first = await db.transaction(async (tx) => {
        const { rows } = await tx.query(`insert into runtime_event_ledger (key) values ($1) on conflict do nothing returning key`, [`reply:${answer.messageId}`]);
        return rows.length > 0;
      });
      if (!first) return;
      await deps.platforms[g.kind].sendMessage({ botToken: box.open(g.botTokenSealed), botId: g.botId, chatId: paired.chatId, text: answer.text.slice(0, 4000) });
    },

    /** Drops cached gateways after a change (token, secret, enabled, deletion). */
    forget(gatewayId: string): void {
      cache.delete(gatewayId);
    },
  };
}

function codeMessage(code: string): string {
  return `Your pairing code is ${code}. Ask an administrator to approve it (it expires in one hour).`;
}

function systemCtxFor(g: GatewayRow, log: Logger): Ctx {
  return { tenantId: g.tenantId, actor: { kind: 'system', name: 'gateway' }, requestId: crypto.randomUUID(), log, channel: g.kind };
}

export type PairingService = ReturnType<typeof createPairingService>;
