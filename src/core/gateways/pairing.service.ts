import { createHmac, randomInt } from 'node:crypto';
import type { Database, Tx } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { AuditService } from '../audit/audit.service.js';
import { actorString, type Ctx, type UserActor } from '../../kernel/context.js';
import { AppError, NotFoundError, RateLimitedError, UnauthenticatedError } from '../../kernel/errors.js';
import type { EventBus } from '../../kernel/events.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { Logger } from '../../kernel/logger.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import type { SessionsService } from '../sessions/sessions.service.js';
import type { EventLedgerRepo } from '../sessions/event-ledger.repo.js';
import type { SessionsRepo } from '../sessions/sessions.repo.js';
import type { TurnsRepo } from '../sessions/turns.repo.js';
import type { GatewayRow, GatewaysRepo } from './gateways.repo.js';
import type { PairingCodeRow, PairingRepo } from './pairing.repo.js';
import type { ChatPlatform, GatewayKind, InboundMessage } from './platforms.js';

/** What peers do (DESIGN.md 8): an alphabet without look-alikes, 8 characters, an hour to approve. */
const CODE_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';
const CODE_LENGTH = 8;
const CODE_TTL_MS = 60 * 60_000;
const MAX_PENDING_PER_GATEWAY = 3;
const NEW_CODE_INTERVAL_MS = 10 * 60_000;
/** A pending code is sent again to a user who writes again, at most this often. */
const RESEND_INTERVAL_MS = 60_000;
/**
 * Distinct wrong codes one caller may try on a gateway per window before that caller's approvals there
 * are refused (guessing codes). A code the gateway did issue (used, denied, expired) is no guess.
 */
const MAX_FAILED_APPROVALS = 10;
const FAILED_APPROVAL_WINDOW_MS = 10 * 60_000;

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

function publicCode(c: PairingCodeRow) {
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
function normaliseCode(input: string): string {
  return input.toUpperCase().replace(/[\s-]/g, '').slice(0, 32);
}

export function createPairingService(deps: {
  db: Database;
  repo: PairingRepo;
  gateways: GatewaysRepo;
  sessionsRepo: SessionsRepo;
  turnsRepo: Pick<TurnsRepo, 'failedTurn'>;
  ledger: EventLedgerRepo;
  sessions: SessionsService;
  audit: AuditService;
  bus: EventBus;
  queue: JobQueue;
  box: SecretBox;
  clock: Clock;
  log: Logger;
  platforms: Record<GatewayKind, ChatPlatform>;
  /** Keys the hash of a wrong code in its audit entry (a bare hash of 8 characters is easily reversed). */
  codeHashKey: string;
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
    const row = /^[0-9a-f-]{36}$/i.test(id) ? await deps.gateways.findById(db, id) : null;
    const g = row ? { ...row, secret: row.webhookSecretSealed ? box.open(row.webhookSecretSealed) : null } : null;
    if (cache.size > 10_000) cache.clear();
    cache.set(id, { at: Date.now(), g });
    return g;
  }

  const send = (tx: Tx, g: GatewayRow, chatId: string, text: string) => queue.send(GATEWAY_SEND_JOB, { tenantId: g.tenantId, gatewayId: g.id, chatId, text }, { tx, retryLimit: 5 });
  const codeHash = (code: string) => createHmac('sha256', deps.codeHashKey).update(`pairing-code:${code}`).digest('hex').slice(0, 32);

  /** Issues (or repeats) a pairing code for an unpaired chat user, within the limits of DESIGN.md 8. */
  async function requestPairing(g: GatewayRow, msg: InboundMessage): Promise<'issued' | 'repeated' | 'limited'> {
    const now = clock.now();
    // The common case under a retry storm: the user already has a pending code. Answer without the
    // gateway lock, and send the code again at most once a minute.
    const resent = await repeatPending(g, msg, now);
    if (resent) return 'repeated';
    return db.transaction(async (tx) => {
      // One request at a time per gateway, so the pending limit and the per-user rule hold under races.
      await repo.lockGateway(tx, g.id);
      const user = { tenantId: g.tenantId, gatewayId: g.id, externalUserId: msg.externalUserId };
      if (await repo.hasOpenCode(tx, user, now)) {
        // A retry never replaces the code the user already has (it appeared since the check above).
        return 'repeated';
      }
      // One new code per user per 10 minutes (a denied or expired one counts; a used one does not, so a
      // user who was unpaired can pair again at once).
      if (await repo.hasUnusedCodeSince(tx, user, new Date(now.getTime() - NEW_CODE_INTERVAL_MS))) {
        await send(tx, g, msg.chatId, 'A pairing request from you was made a few minutes ago. Please try again later.');
        return 'limited';
      }
      if ((await repo.countPending(tx, g.tenantId, g.id, now)) >= MAX_PENDING_PER_GATEWAY) {
        await send(tx, g, msg.chatId, 'There are too many pairing requests waiting for approval. Please try again later.');
        return 'limited';
      }
      await repo.retireExpired(tx, g.tenantId, g.id, now);
      for (let attempt = 0; ; attempt++) {
        const code = newCode();
        const id = await repo.insertCode(tx, {
          ...user,
          code,
          externalUserName: msg.externalUserName,
          platformDisplayName: msg.platformDisplayName,
          chatId: msg.chatId,
          expiresAt: new Date(now.getTime() + CODE_TTL_MS),
          now,
        });
        if (id) {
          await send(tx, g, msg.chatId, codeMessage(code));
          await audit.record(tx, systemCtxFor(g, deps.log), { action: 'pairing.request', target: `gateway:${g.id}`, details: { codeId: id, externalUserId: msg.externalUserId, externalUserName: msg.externalUserName } });
          await bus.publish(GATEWAY_EVENTS_CHANNEL, { gatewayId: g.id, type: 'pairing.code_created' } satisfies GatewayEvent, tx);
          return 'issued';
        }
        if (attempt > 5) throw new Error('could not find an unused pairing code');
      }
    });
  }

  /** True when the user has a pending code: it is sent again unless it was sent within the last minute. */
  async function repeatPending(g: GatewayRow, msg: InboundMessage, now: Date): Promise<boolean> {
    const resendBefore = new Date(now.getTime() - RESEND_INTERVAL_MS);
    const open = await repo.openCodeOf(db, { tenantId: g.tenantId, gatewayId: g.id, externalUserId: msg.externalUserId }, now, resendBefore);
    if (!open) return false;
    if (!open.due) return true;
    await db.transaction(async (tx) => {
      // Only one of several concurrent retries wins the right to send.
      if (await repo.markResent(tx, g.tenantId, open.id, now, resendBefore)) await send(tx, g, msg.chatId, codeMessage(open.code));
    });
    return true;
  }

  /** A paired user's message goes to their agent session, owned by the gateway's service user. */
  async function relay(g: GatewayRow, msg: InboundMessage, pairedId: string, sessionId: string | null): Promise<void> {
    const { roles, permissions } = await deps.actorOf(g.tenantId, g.serviceUserId);
    const actor: UserActor = { kind: 'user', userId: g.serviceUserId, tenantId: g.tenantId, roles, permissions, via: 'gateway' };
    const ctx: Ctx = { tenantId: g.tenantId, actor, requestId: crypto.randomUUID(), log: deps.log, channel: g.kind };
    let id = sessionId && (await deps.sessionsRepo.byId(db, g.tenantId, sessionId))?.id;
    if (!id) {
      id = (await deps.sessions.create(ctx, { title: `${g.kind}: ${msg.externalUserName || msg.platformDisplayName || msg.externalUserId}` })).sessionId;
      await repo.setSession(db, g.tenantId, pairedId, id);
    }
    try {
      await deps.sessions.prompt(ctx, { id, text: msg.text });
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500) throw err;
      // Not ready, over budget, empty: tell the chat user rather than leave them waiting.
      await db.transaction((tx) => send(tx, g, msg.chatId, `Sorry, the agent cannot take this message: ${err.message}`));
    }
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
      const paired = await repo.pairedUser(db, g.tenantId, g.id, msg.externalUserId);
      if (paired) {
        await relay(g, msg, paired.id, paired.sessionId);
        return { ok: true, outcome: 'relayed' };
      }
      return { ok: true, outcome: await requestPairing(g, msg) };
    },

    /** Pending codes (unexpired, unconsumed) of one gateway. */
    async listCodes(ctx: Ctx, gatewayId: string) {
      const g = await deps.loadGateway(ctx, gatewayId);
      return (await repo.pendingCodes(db, g.tenantId, g.id, clock.now())).map(publicCode);
    },

    /** Pending codes of every gateway of the tenant, with the gateway they belong to (for `aws pair`). */
    async listAllCodes(ctx: Ctx) {
      const tenantId = deps.access(ctx);
      return (await repo.pendingCodes(db, tenantId, null, clock.now())).map((c) => ({ ...publicCode(c), gatewayKind: c.gatewayKind, botUsername: c.botUsername }));
    },

    /**
     * Approves a pending code (SPEC.md Pairing code): consumed and paired user created in one
     * transaction, audited, `pairing.code_approved` pushed to every process. Unknown, expired or used
     * codes are 404. Guessing is limited per caller and gateway: after MAX_FAILED_APPROVALS distinct
     * codes the gateway never issued, that caller's approvals there are 429 for the rest of the window
     * (a code the gateway did issue, e.g. one a concurrent request just approved, is not a guess).
     * Without a gateway id (CLI), the code alone names it.
     */
    async approve(ctx: Ctx, input: { gatewayId?: string; code: string }) {
      const tenantId = deps.access(ctx);
      const code = normaliseCode(input.code);
      const now = clock.now();
      let g: GatewayRow;
      if (input.gatewayId) g = await deps.loadGateway(ctx, input.gatewayId);
      else {
        const gatewayId = await repo.gatewayOfPendingCode(db, tenantId, code, now);
        if (!gatewayId) throw new NotFoundError('pairing code not found or expired');
        g = await deps.loadGateway(ctx, gatewayId);
      }
      const actx: Ctx = { ...ctx, tenantId: g.tenantId };
      const target = `gateway:${g.id}`;
      const result = await db.transaction(async (tx) => {
        const guesses = await audit.distinctDetailCount(tx, actx, { tenantId: g.tenantId, action: 'pairing.approve_failed', target, field: 'codeHash', since: new Date(now.getTime() - FAILED_APPROVAL_WINDOW_MS) });
        if (guesses >= MAX_FAILED_APPROVALS) {
          throw new RateLimitedError('too many wrong pairing codes from you for this gateway; try again in a few minutes', { details: { windowMinutes: FAILED_APPROVAL_WINDOW_MS / 60_000 } });
        }
        const c = await repo.consume(tx, g.tenantId, g.id, code, now);
        if (!c) return null;
        await repo.upsertPairedUser(tx, {
          tenantId: g.tenantId,
          gatewayId: g.id,
          externalUserId: c.externalUserId,
          externalUserName: c.externalUserName,
          platformDisplayName: c.platformDisplayName,
          chatId: c.chatId,
          approvedBy: actorString(ctx.actor),
        });
        await audit.record(tx, actx, { action: 'pairing.approve', target, details: { codeId: c.id, externalUserId: c.externalUserId, externalUserName: c.externalUserName } });
        await send(tx, g, c.chatId, 'You are paired. Send a message to talk to the agent.');
        await bus.publish(GATEWAY_EVENTS_CHANNEL, { gatewayId: g.id, type: 'pairing.code_approved', userId: c.externalUserId, codeId: c.id } satisfies GatewayEvent, tx);
        return c;
      });
      if (!result) {
        // Audited either way; only a code the gateway never issued counts as a guess (by its keyed hash,
        // never the code itself, so distinct codes can be counted).
        const issued = await repo.codeIssued(db, g.tenantId, g.id, code);
        await db.transaction((tx) => audit.record(tx, actx, { action: 'pairing.approve_failed', target, details: issued ? { reason: 'not pending' } : { reason: 'unknown code', codeHash: codeHash(code) } }));
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
        const denied = await repo.deny(tx, tenantId, input.gatewayId ?? null, code, now);
        if (!denied) throw new NotFoundError('pairing code not found or expired');
        await audit.record(tx, { ...ctx, tenantId }, { action: 'pairing.deny', target: `gateway:${denied.gatewayId}`, details: { codeId: denied.id, externalUserId: denied.externalUserId } });
      });
    },

    async pairedUsers(ctx: Ctx, gatewayId: string) {
      const g = await deps.loadGateway(ctx, gatewayId);
      return (await repo.pairedUsers(db, g.tenantId, g.id)).map((p) => ({ id: p.id, gatewayId: p.gatewayId, externalUserId: p.externalUserId, externalUserName: p.externalUserName, platformDisplayName: p.platformDisplayName, pairedAt: p.pairedAt }));
    },

    /** Unpairs a chat user: their next message starts pairing again. */
    async revoke(ctx: Ctx, input: { gatewayId: string; externalUserId: string }): Promise<void> {
      const g = await deps.loadGateway(ctx, input.gatewayId);
      await db.transaction(async (tx) => {
        if (!(await repo.removePairedUser(tx, g.tenantId, g.id, input.externalUserId))) throw new NotFoundError('paired user not found');
        await audit.record(tx, ctx, { action: 'pairing.revoke', target: `gateway:${g.id}`, details: { externalUserId: input.externalUserId } });
      });
    },

    /**
     * Codes of a gateway approved since a moment, for the gateway stream's poll: approvals made by a
     * process whose events cannot reach this one (the embedded database has no cross-process bus).
     * Access was checked when the stream opened.
     */
    async approvedSince(tenantId: string, gatewayId: string, since: Date) {
      return repo.approvedSince(db, tenantId, gatewayId, since);
    },

    /** Pending codes for the gateway stream's poll (access checked when the stream opened). */
    async pendingForStream(tenantId: string, gatewayId: string) {
      return (await repo.pendingCodes(db, tenantId, gatewayId, clock.now())).map(publicCode);
    },

    /** The gateway-send job: one message to a chat through the platform. */
    async sendJob(_ctx: Ctx, data: { tenantId?: string; gatewayId: string; chatId: string; text: string }): Promise<void> {
      // Jobs queued before the tenant was part of the payload name only the gateway.
      const g = data.tenantId ? await deps.gateways.find(db, data.tenantId, data.gatewayId) : await deps.gateways.findById(db, data.gatewayId);
      if (!g) return; // deleted meanwhile
      await deps.platforms[g.kind].sendMessage({ botToken: box.open(g.botTokenSealed), botId: g.botId, chatId: data.chatId, text: data.text });
    },

    /**
     * The gateway-reply job: at the end of a turn, sends the agent's answer back to the chat, once. With
     * `turnId`, the turn ended with no answer (given up, or lost with its runtime): the chat is told so.
     */
    async replyJob(ctx: Ctx, data: { tenantId?: string; sessionId: string; turnId?: string }): Promise<void> {
      if (!data.tenantId) {
        ctx.log.warn({ sessionId: data.sessionId }, 'gateway-reply job without a tenant (queued before an upgrade); skipped');
        return;
      }
      const paired = await repo.pairedUserBySession(db, data.tenantId, data.sessionId);
      if (!paired) return;
      const g = await deps.gateways.find(db, paired.tenantId, paired.gatewayId);
      if (!g) return;
      if (data.turnId) {
        const failed = await deps.turnsRepo.failedTurn(db, paired.tenantId, data.sessionId, data.turnId);
        if (!failed) return;
        if (!(await db.transaction((tx) => deps.ledger.claimLedgerKey(tx, `reply:turn:${data.turnId}`)))) return;
        const text =
          failed.status === 'lost'
            ? 'Your last message was not fully answered: the agent stopped during the turn. Send it again to retry.'
            : `Your last message could not be handed to the agent${failed.error ? ` (${failed.error})` : ''}. Send it again to retry.`;
        await deps.platforms[g.kind].sendMessage({ botToken: box.open(g.botTokenSealed), botId: g.botId, chatId: paired.chatId, text: text.slice(0, 4000) });
        return;
      }
      const answer = await deps.sessions.lastAnswer({ ...ctx, tenantId: paired.tenantId }, { id: data.sessionId });
      if (!answer || !answer.text.trim()) return;
      const first = await db.transaction((tx) => deps.ledger.claimLedgerKey(tx, `reply:${answer.messageId}`));
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
