import { randomUUID } from 'node:crypto';
import type { Database, Queryable, Tx } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { Ctx, Actor } from '../../kernel/context.js';
import { ConflictError, NotFoundError, UnauthenticatedError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/logger.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import type { AuditService } from '../audit/audit.service.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { GitConnectionsRepo } from '../connectors/git-connections.repo.js';
import type { GitHostRow, GitHostsRepo } from '../connectors/git-hosts.repo.js';
import type { UsersRepo } from '../users/users.repo.js';
import {
  AUDIT,
  CODE_HOST_REPLY_JOB,
  CODE_HOST_RUN_JOB,
  DELIVERY_KEEP_DAYS,
  type CodeHostKind,
  type CodeHostPerson,
  type CodeHostReplyJob,
  type CodeHostRunJob,
  type CodeHostTrigger,
  type DeliveryOutcome,
  type RefusalReason,
} from './codehost-contract.js';
import type { CodeHostDeliveriesRepo, DeliveryRow, NewDelivery } from './codehost-deliveries.repo.js';
import { deliveryIdOf, eventOf, parseDelivery, RATE_WINDOW_MS, rateLimited, refusalText, repoAllowed, testDeliveryHeaders, verifyDelivery, type WebhookHeaders } from './codehost-webhook-fns.js';

/** A host as the webhook route needs it: cached briefly (the route is hot and public), with its secret opened. */
interface HookHost {
  host: GitHostRow;
  kind: CodeHostKind;
  secret: string;
}

/** How long a host found by its webhook id is kept; an unknown id, shorter (a webhook just enabled elsewhere). */
const HOST_CACHE_MS = 30_000;
const MISS_CACHE_MS = 5_000;
const HOST_CACHE_MAX = 10_000;
/** The webhook id: 24 base64url characters (made with the secret by the admin service). */
const HOOK_ID = /^[A-Za-z0-9_-]{24}$/;
/** A host account is answered at most this many refusals per repository an hour; further ones are recorded, not answered. */
export const REFUSAL_REPLIES_PER_HOUR = 3;
const SWEEP_BATCH = 5000;

export interface ReceiveResult {
  /** 202: recorded now; 200: a delivery recorded before (a replay: nothing done). */
  status: 202 | 200;
  outcome: DeliveryOutcome;
  deliveryId: string;
  /** The refusal's or ignoring's reason, when there is one. */
  reason?: string;
}

type Decision =
  | { outcome: 'queued'; person: CodeHostPerson; actor: Actor }
  | { outcome: 'refused'; reason: RefusalReason; person: CodeHostPerson | null; actor: Actor; reply: boolean };

export function createCodeHostIntake(deps: {
  db: Database;
  repo: CodeHostDeliveriesRepo;
  hosts: GitHostsRepo;
  connections: GitConnectionsRepo;
  users: UsersRepo;
  assignments: { roleNames(q: Queryable, userId: string): Promise<string[]> };
  rbac: { resolvePermissions(tenantId: string, roleNames: string[], q?: Queryable): Promise<RbacPermissions> };
  audit: AuditService;
  queue: JobQueue;
  box: SecretBox;
  clock: Clock;
  log: Logger;
}) {
  const { db, repo, audit, queue, clock, log } = deps;
  const cache = new Map<string, { at: number; h: HookHost | null }>();

  /** The enabled, verifiable host of a webhook id, or null (unknown, disabled, no secret, no kind). */
  async function hostOf(hookId: string): Promise<HookHost | null> {
    if (!HOOK_ID.test(hookId)) return null;
    const now = Date.now();
    const hit = cache.get(hookId);
    if (hit && now - hit.at < (hit.h ? HOST_CACHE_MS : MISS_CACHE_MS)) return hit.h;
    const host = await deps.hosts.findByWebhookId(db, hookId);
    let h: HookHost | null = null;
    if (host && host.webhookEnabled && host.webhookSecretSealed && host.kind) {
      try {
        h = { host, kind: host.kind, secret: deps.box.open(host.webhookSecretSealed) };
      } catch (err) {
        // A secret sealed with a key no longer configured: nothing can verify; the admin rotates it.
        log.error({ host: host.name, err: (err as Error).message }, 'code host webhook secret cannot be opened: rotate it');
      }
    }
    if (cache.size >= HOST_CACHE_MAX) cache.clear();
    cache.set(hookId, { at: now, h });
    return h;
  }

  /** Who in the tenant a host account is: their connection to this host, else an email the host asserts. */
  async function personOf(host: GitHostRow, t: CodeHostTrigger): Promise<{ person: CodeHostPerson; active: boolean } | null> {
    const conns = await deps.connections.findByAccount(db, host.tenantId, host.id, t.actor.login);
    if (conns.length > 1) {
      // Two people connected the same host account: which one asked is not known, so neither is taken.
      log.warn({ host: host.name }, 'code host account connected by two people: not mapped');
      return null;
    }
    if (conns.length === 1) {
      const u = await deps.users.findById(db, host.tenantId, conns[0]!.userId);
      if (u) return { person: { userId: u.id, handle: u.handle, mappedBy: 'connection' }, active: u.deactivatedAt === null };
    }
    if (t.actor.email) {
      const u = await deps.users.findByEmail(db, host.tenantId, t.actor.email);
      // Someone connected to this host is known there by their account alone: another account showing their
      // email (hosts differ in whether they verify emails) is not them.
      if (u && !(await deps.connections.find(db, host.tenantId, host.id, u.id))) {
        return { person: { userId: u.id, handle: u.handle, mappedBy: 'email' }, active: u.deactivatedAt === null };
      }
    }
    return null;
  }

  const systemActor: Actor = { kind: 'system', name: 'codehost' };

  /** Whether a trigger runs, or why not (reads only; the caller writes the outcome with the delivery). */
  async function decide(host: GitHostRow, t: CodeHostTrigger, now: Date): Promise<Decision> {
    // Not on a repository this host's webhook does not serve: no answer there either (it may not be ours to write in).
    if (!repoAllowed(host.webhookRepos, t.repo)) return { outcome: 'refused', reason: 'not_allowed_repo', person: null, actor: systemActor, reply: false };
    const replyAllowed = async () => (await repo.refusedSince(db, host.tenantId, host.id, t.repo, t.actor.login, new Date(now.getTime() - RATE_WINDOW_MS))) < REFUSAL_REPLIES_PER_HOUR;
    if (t.fromFork) return { outcome: 'refused', reason: 'fork', person: null, actor: systemActor, reply: await replyAllowed() };
    const found = await personOf(host, t);
    if (!found) return { outcome: 'refused', reason: 'unmapped', person: null, actor: systemActor, reply: await replyAllowed() };
    const { person } = found;
    if (!found.active) return { outcome: 'refused', reason: 'deactivated', person, actor: systemActor, reply: await replyAllowed() };
    const roles = await deps.assignments.roleNames(db, person.userId);
    const permissions = await deps.rbac.resolvePermissions(host.tenantId, roles);
    const actor: Actor = { kind: 'user', userId: person.userId, tenantId: host.tenantId, roles, permissions, via: 'codehost' };
    if (!permissions.agents.create || !permissions.agents.code_host) return { outcome: 'refused', reason: 'no_permission', person, actor, reply: await replyAllowed() };
    const counts = await repo.queuedSince(db, host.tenantId, host.id, t.repo, person.userId, new Date(now.getTime() - RATE_WINDOW_MS));
    if (rateLimited(counts.person, counts.repo)) return { outcome: 'refused', reason: 'rate_limited', person, actor, reply: await replyAllowed() };
    return { outcome: 'queued', person, actor };
  }

  const ctxOf = (tenantId: string, actor: Actor, requestId: string): Ctx => ({ tenantId, actor, requestId, log, channel: 'codehost' });

  /** Verification, recording and the decision's effects: receive() and testDelivery() alike. */
  async function accept(input: { hookId: string; headers: WebhookHeaders; rawBody: Buffer; requestId?: string }, o: { test?: boolean } = {}): Promise<ReceiveResult> {
    const h = await hostOf(input.hookId);
    // Unknown, disabled and secretless webhooks look alike: nothing tells a prober which ids exist.
    if (!h) throw new NotFoundError('no such webhook');
    if (!verifyDelivery(h.kind, input.headers, input.rawBody, h.secret)) {
      log.warn({ host: h.host.name }, 'code host webhook delivery failed verification');
      throw new UnauthenticatedError('the delivery does not verify with this webhook\'s secret');
    }
    const { host } = h;
    const now = clock.now();
    const event = eventOf(h.kind, input.headers);
    const deliveryId = deliveryIdOf(h.kind, input.headers, input.rawBody);
    const parsed = parseDelivery(h.kind, event, input.rawBody, { mention: host.mention, label: host.triggerLabel }, deliveryId);
    const t = 'trigger' in parsed ? parsed.trigger : null;
    const decision = t ? await decide(host, t, now) : null;
    const rowId = randomUUID();
    const requestId = input.requestId ?? rowId;
    const row: NewDelivery = {
      id: rowId,
      tenantId: host.tenantId,
      hostId: host.id,
      deliveryId,
      event,
      outcome: o.test ? 'test' : decision ? decision.outcome : 'ignored',
      reason: o.test ? null : decision?.outcome === 'refused' ? decision.reason : 'ignored' in parsed ? parsed.ignored.slice(0, 120) : null,
      repo: t?.repo ?? null,
      targetType: t?.target.type ?? null,
      targetNumber: t?.target.number ?? null,
      targetUrl: t?.target.url ?? null,
      actorLogin: t?.actor.login ?? null,
      userId: decision?.person?.userId ?? null,
    };
    return db.transaction(async (tx) => {
      const recorded = await repo.record(tx, row, now);
      // Seen before (a host's retry, or the other serve took it first): the first did whatever was to be done.
      if (!recorded.fresh) return { status: 200 as const, outcome: 'replayed' as const, deliveryId };
      if (t && decision && !o.test) await effects(tx, host, t, decision, rowId, requestId);
      return { status: 202 as const, outcome: row.outcome, deliveryId, ...(row.reason ? { reason: row.reason } : {}) };
    });
  }

  /** In the delivery's transaction: the run or the refusal's answer queued, and audited. */
  async function effects(tx: Tx, host: GitHostRow, t: CodeHostTrigger, d: Decision, rowId: string, requestId: string): Promise<void> {
    const ctx = ctxOf(host.tenantId, d.actor, requestId);
    const target = { type: t.target.type, number: t.target.number, url: t.target.url };
    if (d.outcome === 'queued') {
      const job: CodeHostRunJob = { tenantId: host.tenantId, hostId: host.id, deliveryRowId: rowId, person: d.person, trigger: t };
      await queue.send(CODE_HOST_RUN_JOB, job, { tx, singletonKey: `codehost:${rowId}`, retryLimit: 5 });
      await audit.record(tx, ctx, {
        action: AUDIT.trigger,
        target: `git_host:${host.name}`,
        details: { repo: t.repo, target, via: t.via, mappedBy: d.person.mappedBy, account: t.actor.login, deliveryId: t.deliveryId, delivery: rowId },
      });
      return;
    }
    if (d.reply) {
      const key = `refused:${rowId}`;
      const reply: CodeHostReplyJob = {
        tenantId: host.tenantId,
        hostId: host.id,
        repo: t.repo,
        projectId: t.projectId,
        target: { type: t.target.type, number: t.target.number },
        text: refusalText(d.reason as Exclude<RefusalReason, 'not_allowed_repo' | 'cost_limit'>, { login: t.actor.login, mention: host.mention, label: host.triggerLabel }),
        key,
      };
      await queue.send(CODE_HOST_REPLY_JOB, reply, { tx, singletonKey: key, retryLimit: 5 });
    }
    await audit.record(tx, ctx, {
      action: AUDIT.refused,
      target: `git_host:${host.name}`,
      // The person, when the account mapped to one, is the audit's user (as actor or, for a deactivated one, named).
      userId: d.person?.userId ?? null,
      details: { reason: d.reason, repo: t.repo, target, via: t.via, account: t.actor.login, deliveryId: t.deliveryId, delivery: rowId, answered: d.reply },
    });
  }

  return {
    /**
     * A delivery from a code host (public: authenticated by the webhook's secret over the raw body).
     * Unknown/disabled webhook: 404, and a delivery that does not verify: 401, both with nothing stored.
     * Otherwise recorded once per delivery id (a replay: 200 `replayed`, nothing more), and in the same
     * transaction the trigger's run queued, or its refusal answered and audited. Never a 5xx for what the
     * delivery holds.
     */
    receive(input: { hookId: string; headers: WebhookHeaders; rawBody: Buffer; requestId?: string }): Promise<ReceiveResult> {
      return accept(input);
    },

    /** Whether a webhook id names an enabled webhook (the route asks before reading a body: no body is read for nothing). */
    async known(hookId: string): Promise<boolean> {
      return (await hostOf(hookId)) !== null;
    },

    /**
     * The admin's "send a test delivery" (called by the code-host admin service, which authorises): a
     * `ping` signed with the host's own secret, through the same verification and recording as any
     * delivery; recorded as `test`, nothing run.
     */
    async testDelivery(tenantId: string, hostId: string): Promise<ReceiveResult> {
      const host = await deps.hosts.findById(db, tenantId, hostId);
      if (!host) throw new NotFoundError('git host not found');
      if (!host.webhookId || !host.webhookEnabled || !host.webhookSecretSealed || !host.kind) {
        throw new ConflictError('webhooks are not enabled on this git host', { hint: 'Enable them (and set the host kind) first.' });
      }
      // The test must see the settings as they are now, not as cached.
      cache.delete(host.webhookId);
      const deliveryId = `test-${randomUUID()}`;
      const rawBody = Buffer.from(JSON.stringify({ zen: 'A test delivery from the Agent Workspace Service.', hook_id: host.webhookId, sent_at: clock.now().toISOString() }));
      const headers = testDeliveryHeaders(host.kind, deps.box.open(host.webhookSecretSealed), rawBody, deliveryId);
      return accept({ hookId: host.webhookId, headers, rawBody }, { test: true });
    },

    /** The latest deliveries of a host, newest first (the admin's log; the admin service authorises). */
    recent(tenantId: string, hostId: string, limit = 50): Promise<DeliveryRow[]> {
      return repo.recent(db, tenantId, hostId, limit);
    },

    /** Drops a webhook's cached host after its settings changed (secret, enabled, mention, label, repositories). */
    forget(hookId: string): void {
      cache.delete(hookId);
    },

    /** Daily: deliveries older than DELIVERY_KEEP_DAYS go (in batches); how many went. */
    async sweepJob(_ctx?: Ctx): Promise<{ deleted: number }> {
      const before = new Date(clock.now().getTime() - DELIVERY_KEEP_DAYS * 24 * 3600_000);
      let deleted = 0;
      for (;;) {
        const n = await repo.deleteBefore(db, before, SWEEP_BATCH);
        deleted += n;
        if (n < SWEEP_BATCH) break;
      }
      if (deleted) log.info({ deleted }, 'code host deliveries swept');
      return { deleted };
    },
  };
}
