import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Database } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission, tenantOf } from '../authz.js';
import type { Ctx, UserActor } from '../context.js';
import { AppError, ForbiddenError, NotFoundError, PayloadTooLargeError, RateLimitedError, UnauthenticatedError, UpstreamError, ValidationError } from '../errors.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { Logger } from '../logger.js';
import { toolAllowed, type RbacPermissions } from '../rbac/permissions.js';
import type { RuntimeClient } from '../runtime/runtime-client.js';
import { ascendingId } from '../runtime/runtime-ids.js';
import type { RuntimeService } from '../runtime/runtime.service.js';
import { findTemplate, mayUseTemplate } from '../templates/templates.service.js';
import type { UsageService } from '../usage/usage.service.js';
import { ANALYTICS_JOB, type SessionStreams } from './session-stream.js';
import type { SessionRow, SessionsRepo, Viewer } from './sessions.repo.js';

export const AGENT_TURN_JOB = 'agent-turn';
export { ANALYTICS_JOB };

/** Tools of the runtime (opencode 1.18) that a role's tools policy can withhold from the model. */
const RUNTIME_TOOLS = ['bash', 'edit', 'write', 'read', 'glob', 'grep', 'list', 'patch', 'multiedit', 'webfetch', 'websearch', 'codesearch', 'task', 'todowrite', 'todoread', 'skill', 'lsp'];
/** How often a turn is attempted before it is given up (and reported on the session's stream). */
const TURN_ATTEMPTS = 4;
/**
 * A turn job still active after this long is taken to have lost its worker and is retried. It must
 * exceed the longest a live attempt can take (runtime calls time out after 10 s; an attempt makes at most
 * three), or a slow attempt and its retry could both send.
 */
const TURN_EXPIRE_S = 45;
const MAX_TEXT = 200_000;
const AGENT_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export interface PromptFile {
  filename: string;
  mime: string;
  data: Buffer;
}

export interface PromptInput {
  text?: string;
  agent?: string;
  agentProfileId?: string;
  /** SPEC.md parts form: text entries and file entries (data: URL or base64 content). */
  parts?: Array<{ type: string; text?: string; mime?: string; filename?: string; url?: string; content?: string }>;
  /** Multipart files, already read by the adapter within the size limits. */
  files?: PromptFile[];
}

export interface AnalyticsData {
  kind: 'usage' | 'tool' | 'denied' | 'cost_limit';
  key: string;
  sessionId: string;
  tenantId: string;
  userId: string;
  channel: string;
  [k: string]: any;
}

const run = promisify(execFile);
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export function createSessionsService(deps: {
  db: Database;
  repo: SessionsRepo;
  audit: AuditService;
  queue: JobQueue;
  runtime: RuntimeService;
  client: RuntimeClient;
  streams: SessionStreams;
  usage: UsageService;
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  clock: Clock;
  log: Logger;
  workspaceRoot: string;
  limits: { maxFiles: number; maxFileBytes: number };
  demo: { allowAnonymous: boolean; operator: () => Promise<{ tenantId: string; userId: string } | null> };
}) {
  const { db, repo, audit, queue, runtime, client, streams, clock } = deps;
  let gitMissing = false;

  function userOf(ctx: Ctx): UserActor {
    if (ctx.actor.kind !== 'user') {
      throw ctx.actor.kind === 'anonymous' ? new UnauthenticatedError() : new ForbiddenError('sessions belong to users: the operator acts on them through the API');
    }
    return ctx.actor;
  }

  /** The operator user, when demo mode is on and the operator belongs to this tenant (demo mode acts as them). */
  async function operatorId(tenantId: string): Promise<string | null> {
    if (!deps.demo.allowAnonymous) return null;
    const op = await deps.demo.operator();
    return op?.tenantId === tenantId ? op.userId : null;
  }

  async function viewer(ctx: Ctx, browserSession: string | undefined): Promise<Viewer> {
    const actor = userOf(ctx);
    // A demo-mode caller IS the operator; the browser id only widens what a signed-in user sees.
    const bs = browserSession && actor.via !== 'demo' ? sha256(browserSession) : null;
    return { tenantId: actor.tenantId, userId: actor.userId, browserSession: bs, operatorId: bs ? await operatorId(actor.tenantId) : null };
  }

  async function owned(ctx: Ctx, id: string, browserSession: string | undefined): Promise<SessionRow> {
    const v = await viewer(ctx, browserSession);
    const s = await repo.findVisible(db, id, v);
    if (!s) throw new NotFoundError('session not found');
    return s;
  }

  async function ensureWorkspace(dir: string): Promise<void> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    // A git repository makes the directory the runtime's project root (without one the runtime treats
    // the whole filesystem as the worktree).
    if (!gitMissing && !existsSync(join(dir, '.git'))) {
      await run('git', ['init', '-q', dir]).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') {
          gitMissing = true;
          deps.log.warn('git is not installed: agent workspaces are not git repositories, so the runtime cannot confine its project root to them');
        } else throw err;
      });
    }
  }

  /** Builds the runtime parts of a prompt from any of the three request forms, within the limits. */
  function buildParts(input: PromptInput): Array<Record<string, unknown>> {
    const parts: Array<Record<string, unknown>> = [];
    const files: Array<{ filename: string; mime: string; url: string }> = [];
    const addText = (text: string) => {
      if (text.length > MAX_TEXT) throw new PayloadTooLargeError(`text is longer than ${MAX_TEXT} characters`);
      if (text.trim()) parts.push({ id: ascendingId('prt'), type: 'text', text });
    };
    const addFile = (filename: string, mime: string, data: Buffer) => {
      if (files.length >= deps.limits.maxFiles) throw new PayloadTooLargeError(`at most ${deps.limits.maxFiles} files per prompt`, { details: { maxFiles: deps.limits.maxFiles } });
      if (data.length > deps.limits.maxFileBytes) throw new PayloadTooLargeError(`file "${filename}" is larger than ${deps.limits.maxFileBytes} bytes`, { details: { maxFileBytes: deps.limits.maxFileBytes } });
      if (!/^[\w.+-]+\/[\w.+-]+$/.test(mime)) throw new ValidationError(`file "${filename}" has an invalid media type`);
      files.push({ filename: filename.replace(/[/\\\0]/g, '_').slice(0, 255) || 'file', mime, url: `data:${mime};base64,${data.toString('base64')}` });
    };
    if (input.text !== undefined) addText(input.text);
    for (const p of input.parts ?? []) {
      if (p.type === 'text') {
        if (typeof p.text !== 'string') throw new ValidationError('a text part needs text');
        addText(p.text);
      } else if (p.type === 'file') {
        const mime = p.mime ?? 'application/octet-stream';
        let data: Buffer;
        if (p.url !== undefined) {
          // Only inline data: a URL the runtime would fetch (http:, file:) could read the server's files or network.
          const m = /^data:([^;,]*)(;base64)?,(.*)$/s.exec(p.url);
          if (!m) throw new ValidationError('a file part\'s url must be a data: URL (send the content, not a link)');
          data = m[2] ? Buffer.from(m[3], 'base64') : percentDecoded(m[3]);
        } else if (p.content !== undefined) {
          data = Buffer.from(p.content, 'base64');
        } else throw new ValidationError('a file part needs content (base64) or a data: url');
        addFile(p.filename ?? 'file', p.mime ?? (/^data:([^;,]+)/.exec(p.url ?? '')?.[1] || mime), data);
      } else {
        throw new ValidationError(`unknown part type "${p.type}" (text and file are accepted)`);
      }
    }
    for (const f of input.files ?? []) addFile(f.filename, f.mime, f.data);
    for (const f of files) parts.push({ id: ascendingId('prt'), type: 'file', mime: f.mime, filename: f.filename, url: f.url });
    if (parts.length === 0) throw new ValidationError('the prompt is empty: send text or files');
    return parts;
  }

  /** Cost limits of the caller's roles, checked before a turn is queued. */
  async function checkCost(actor: UserActor): Promise<void> {
    const { monthly_limit_usd: monthly, per_request_limit_usd: perRequest } = actor.permissions.cost;
    if (perRequest !== undefined && perRequest <= 0) {
      throw new RateLimitedError('your role allows no spending per request', { code: 'cost_limit_exceeded', details: { perRequestLimitUsd: perRequest } });
    }
    if (monthly === undefined) return;
    const now = clock.now();
    const from = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    const spent = await repo.spentSince(db, actor.tenantId, actor.userId, from);
    if (spent >= monthly) {
      const resetsAt = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
      throw new RateLimitedError(`monthly cost limit reached: $${spent.toFixed(2)} of $${monthly} spent this month`, {
        code: 'cost_limit_exceeded',
        hint: `The limit resets on ${resetsAt.toISOString().slice(0, 10)}; an admin can raise it in your role's cost.monthly_limit_usd.`,
        details: { monthlyLimitUsd: monthly, spentUsd: Math.round(spent * 1e6) / 1e6, resetsAt },
      });
    }
  }

  const publicMessage = (m: { info: Record<string, any>; parts: Array<Record<string, any>> }, sessionId: string) => {
    const { path: _path, ...info } = m.info;
    return { info: { ...info, sessionID: sessionId }, parts: m.parts.map((p) => ({ ...p, sessionID: sessionId })) };
  };

  return {
    /** SPEC.md sessions rule 1: the caller's sessions (plus demo-mode ones of this browser, until claimed). */
    async list(ctx: Ctx, input: { browserSession?: string }) {
      const rows = await repo.listVisible(db, await viewer(ctx, input.browserSession));
      return rows.map((s) => ({ sessionId: s.id, title: s.title, updatedAt: s.updatedAt, templateSlug: s.templateSlug, ...(s.claimable ? { claimable: true } : {}) }));
    },

    /** Creates a session (agents.create); with a template, snapshots its prompt and model (rule 2). */
    async create(ctx: Ctx, input: { title: string; templateSlug?: string; browserSession?: string }): Promise<{ sessionId: string }> {
      const tenantId = requirePermission(ctx, 'agents.create');
      const actor = userOf(ctx);
      const title = input.title.trim();
      if (!title) throw new ValidationError('title must not be empty');
      let snapshot: { systemPrompt: string; model: string | null } | null = null;
      if (input.templateSlug) {
        const t = await findTemplate(db, tenantId, input.templateSlug);
        if (!t) throw new NotFoundError(`template "${input.templateSlug}" not found`);
        if (!mayUseTemplate(actor.permissions.agents.use_templates, t.slug)) {
          throw new ForbiddenError(`missing permission agents.use_templates for template "${t.slug}"`, { details: { permission: 'agents.use_templates', template: t.slug } });
        }
        snapshot = { systemPrompt: t.systemPrompt, model: t.model };
      }
      const directory = join(deps.workspaceRoot, tenantId, actor.userId);
      await ensureWorkspace(directory);
      return db.transaction(async (tx) => {
        const s = await repo.insert(tx, {
          tenantId,
          ownerId: actor.userId,
          title,
          templateSlug: input.templateSlug ?? null,
          systemPrompt: snapshot?.systemPrompt ?? null,
          model: snapshot?.model ?? null,
          snapshotAt: snapshot ? clock.now() : null,
          directory,
          channel: ctx.channel,
          browserSession: actor.via === 'demo' && input.browserSession ? sha256(input.browserSession) : null,
        });
        await audit.record(tx, ctx, { action: 'session.create', target: `session:${s.id}`, sessionId: s.id, details: { title, templateSlug: input.templateSlug ?? null } });
        return { sessionId: s.id };
      });
    },

    /** The session's transcript, taken from the runtime (SPEC.md Message shape, our session ids). */
    async messages(ctx: Ctx, input: { id: string; browserSession?: string }) {
      const s = await owned(ctx, input.id, input.browserSession);
      if (!s.upstreamId) return { messages: [] };
      const messages = await client.messages(s.directory, s.upstreamId);
      return { messages: messages.map((m) => publicMessage(m, s.id)) };
    },

    /**
     * Queues an agent turn (SPEC.md rules 3-6): the caller owns the session and may run agents, the
     * runtime is ready, cost limits allow it. The turn, its job and its audit entry commit together.
     */
    async prompt(ctx: Ctx, input: PromptInput & { id: string; browserSession?: string }): Promise<{ jobId: string; sessionId: string }> {
      const tenantId = requirePermission(ctx, 'agents.create');
      const actor = userOf(ctx);
      let s = await owned(ctx, input.id, input.browserSession);
      if (input.agent !== undefined && !AGENT_NAME.test(input.agent)) throw new ValidationError('agent must be an agent name such as build or plan');
      const parts = buildParts(input);
      await checkCost(actor);
      if (s.templateSlug && !s.snapshotAt) {
        // Sessions created before snapshots existed take one now, while the template still exists (rule 5).
        const t = await findTemplate(db, tenantId, s.templateSlug);
        if (t) {
          await repo.snapshot(db, tenantId, s.id, { systemPrompt: t.systemPrompt, model: t.model });
          s = { ...s, systemPrompt: t.systemPrompt, model: t.model, snapshotAt: clock.now() };
        }
      }
      await runtime.resolveModel(tenantId, s.model);
      return db.transaction(async (tx) => {
        const messageId = ascendingId('msg');
        const turnId = await repo.insertTurn(tx, { tenantId, sessionId: s.id, userId: actor.userId, messageId, agent: input.agent ?? null, agentProfileId: input.agentProfileId ?? null, parts });
        await repo.touch(tx, tenantId, s.id);
        const jobId = await queue.send(AGENT_TURN_JOB, { turnId }, { tx, retryLimit: TURN_ATTEMPTS - 1, retryDelay: 1, expireInSeconds: TURN_EXPIRE_S });
        await audit.record(tx, ctx, {
          action: 'agent.prompt',
          target: `session:${s.id}`,
          sessionId: s.id,
          details: { jobId, turnId, agent: input.agent ?? null, agentProfileId: input.agentProfileId ?? null, files: parts.filter((p) => p.type === 'file').length },
        });
        return { jobId, sessionId: s.id };
      });
    },

    /** Checks the caller may watch the session's event stream; the adapter then subscribes. */
    async openStream(ctx: Ctx, input: { id: string; browserSession?: string }): Promise<{ sessionId: string }> {
      const s = await owned(ctx, input.id, input.browserSession);
      return { sessionId: s.id };
    },

    /**
     * Answers a pending tool permission request of this session (rule 7), upstream, and audits the
     * decision. The request must be one the runtime asked in this session (recorded from its events) and
     * not answered yet; of concurrent replies one is delivered, the others are 404. When the runtime does
     * not take the reply, the turn would wait for it forever: it is stopped, the stream gets a
     * session.error, and the answer is 502.
     */
    async replyPermission(ctx: Ctx, input: { id: string; permissionId: string; response: string; browserSession?: string }): Promise<{ ok: true }> {
      const s = await owned(ctx, input.id, input.browserSession);
      if (!['once', 'always', 'reject'].includes(input.response)) throw new ValidationError('response must be once, always or reject');
      const pending = s.upstreamId ? await repo.takePermissionRequest(db, s.tenantId, s.id, input.permissionId) : null;
      if (!pending) throw new NotFoundError('permission request not found (unknown, or already answered)');
      let replied: boolean;
      try {
        replied = await client.replyPermission(s.directory, pending.id, input.response as 'once' | 'always' | 'reject');
      } catch (err) {
        const why = (err as Error).message;
        ctx.log.error({ err: why, sessionId: s.id, permission: pending.permission }, 'permission reply not delivered; stopping the turn');
        // Said first, so the owner reads why before the runtime reports the turn aborted.
        await streams.publish(s.id, 'session.error', { error: { name: 'PermissionReplyFailed', message: `Your answer to the ${pending.permission} request could not be delivered to the agent runtime, so the turn was stopped (${why}).` } });
        await client.abort(s.directory, s.upstreamId!).catch(() => {});
        await db.transaction((tx) =>
          audit.record(tx, ctx, { action: 'permission.reply_failed', target: `tool:${pending.permission}`, sessionId: s.id, details: { permissionId: pending.id, response: input.response, error: why } }),
        );
        throw new UpstreamError('the agent runtime did not take the reply; the turn was stopped', { code: 'upstream_failed', details: { permission: pending.permission } });
      }
      if (!replied) throw new NotFoundError('permission request not found (unknown, or already answered)');
      await db.transaction((tx) =>
        audit.record(tx, ctx, { action: 'permission.reply', target: `tool:${pending.permission}`, sessionId: s.id, details: { permissionId: pending.id, response: input.response } }),
      );
      return { ok: true };
    },

    /** Removes the session from the owner's index (rule 8); the runtime keeps the transcript. */
    async remove(ctx: Ctx, input: { id: string; browserSession?: string }): Promise<void> {
      const s = await owned(ctx, input.id, input.browserSession);
      await db.transaction(async (tx) => {
        // Concurrent deletes of one session: only the one that marks it deleted goes on; the others are 404.
        if (!(await repo.softDelete(tx, s.tenantId, s.id))) throw new NotFoundError('session not found');
        await audit.record(tx, ctx, { action: 'session.delete', target: `session:${s.id}`, sessionId: s.id, details: {} });
      });
      await streams.publish(s.id, 'session.deleted', { info: { id: s.id, title: s.title } });
    },

    /** Takes over a demo-mode session this browser created before signing in (rule 1). */
    async claim(ctx: Ctx, input: { id: string; browserSession?: string }): Promise<{ sessionId: string; claimed: boolean }> {
      const actor = userOf(ctx);
      const s = await owned(ctx, input.id, input.browserSession);
      if (s.ownerId === actor.userId) return { sessionId: s.id, claimed: false };
      await db.transaction(async (tx) => {
        await repo.claim(tx, s.tenantId, s.id, actor.userId);
        await audit.record(tx, ctx, { action: 'session.claim', target: `session:${s.id}`, sessionId: s.id, details: { from: s.ownerId } });
      });
      return { sessionId: s.id, claimed: true };
    },

    /** The last completed assistant answer of a session, as text (system use: chat gateways reply with it). */
    async lastAnswer(ctx: Ctx, input: { id: string }): Promise<{ messageId: string; text: string } | null> {
      if (ctx.actor.kind !== 'system') throw new ForbiddenError('only the system reads answers for relaying');
      const s = await repo.byId(db, tenantOf(ctx), input.id);
      if (!s?.upstreamId) return null;
      const messages = await client.messages(s.directory, s.upstreamId);
      const last = [...messages].reverse().find((m) => m.info.role === 'assistant' && m.info.time.completed);
      if (!last) return null;
      const text = last.parts.filter((p) => p.type === 'text' && !p.synthetic).map((p) => String(p.text ?? '')).join('\n').trim();
      return { messageId: last.info.id, text };
    },

    /**
     * The agent-turn job: sends a queued turn to the runtime exactly once. The runtime message id was
     * chosen when the prompt was accepted, so a retry (worker died after sending) finds the message
     * upstream and stops instead of sending the turn again.
     */
    async runTurn(ctx: Ctx, input: { turnId: string }): Promise<void> {
      const turn = await repo.beginAttempt(db, input.turnId);
      if (!turn || turn.previousStatus === 'sent' || turn.previousStatus === 'failed') return;
      const s = (await repo.byId(db, turn.tenantId, turn.sessionId))!;
      const fail = async (message: string) => {
        await repo.finishTurn(db, turn.tenantId, turn.id, 'failed', message);
        await streams.publish(s.id, 'session.error', { error: { name: 'TurnFailed', message } });
      };
      try {
        await ensureWorkspace(s.directory);
        const upstreamId = s.upstreamId ?? (await repo.bindUpstream(db, s.tenantId, s.id, await client.createSession(s.directory, { title: s.title })));
        if (turn.attempts > 1 && (await client.messageExists(s.directory, upstreamId, turn.messageId))) {
          ctx.log.warn({ turnId: turn.id }, 'turn already reached the runtime on an earlier attempt; not sending it again');
          await repo.finishTurn(db, turn.tenantId, turn.id, 'sent');
          return;
        }
        const model = await runtime.resolveModel(s.tenantId, s.model);
        const perms = await deps.permissionsOf(s.tenantId, s.ownerId);
        // Tools outside the owner's policy are withheld from the model; `question` always, because it
        // waits for an answer no route of ours can give.
        const tools: Record<string, boolean> = { question: false };
        for (const t of RUNTIME_TOOLS) if (!toolAllowed(perms, t)) tools[t] = false;
        await client.promptAsync(s.directory, upstreamId, {
          messageID: turn.messageId,
          parts: turn.parts,
          model: { providerID: model.providerID, modelID: model.modelID },
          ...(turn.agent ? { agent: turn.agent } : {}),
          ...(s.systemPrompt ? { system: s.systemPrompt } : {}),
          tools,
        });
        await repo.finishTurn(db, turn.tenantId, turn.id, 'sent');
      } catch (err) {
        const retryable = !(err instanceof AppError) || err.status >= 500;
        if (retryable && turn.attempts < TURN_ATTEMPTS) throw err;
        await fail((err as Error).message);
      }
    },

    /** The analytics job: records one fact seen on the runtime's stream, once (usage, tool use, denials). */
    async recordAnalytics(ctx: Ctx, data: AnalyticsData): Promise<void> {
      const actx: Ctx = { ...ctx, tenantId: data.tenantId, actor: { kind: 'system', name: 'agent' }, channel: data.channel };
      await db.transaction(async (tx) => {
        if (!(await repo.claimLedgerKey(tx, data.key))) return;
        switch (data.kind) {
          case 'usage': {
            const t = data.tokens ?? {};
            await deps.usage.record(tx, {
              tenantId: data.tenantId,
              userId: data.userId,
              sessionId: data.sessionId,
              messageId: data.messageId,
              model: data.modelId,
              provider: /^aws_[0-9a-f]{32}_(.+)$/.exec(data.providerId)?.[1] ?? data.providerId,
              tokens: { input: t.input ?? 0, output: t.output ?? 0, reasoning: t.reasoning ?? 0, cacheRead: t.cache?.read ?? 0, cacheWrite: t.cache?.write ?? 0 },
              costUsd: data.cost ?? 0,
              channel: data.channel,
            });
            break;
          }
          case 'tool':
            await audit.record(tx, actx, { action: 'tool.execute', target: data.tool, sessionId: data.sessionId, userId: data.userId, durationMs: data.durationMs, details: { callId: data.callId, status: data.status, ...(data.title ? { title: data.title } : {}) } });
            break;
          case 'denied':
            await audit.record(tx, actx, { action: 'tool.denied', target: data.tool, sessionId: data.sessionId, userId: data.userId, details: { reason: data.reason, patterns: data.patterns } });
            break;
          case 'cost_limit':
            await audit.record(tx, actx, { action: 'cost.limit_reached', target: `session:${data.sessionId}`, sessionId: data.sessionId, userId: data.userId, details: { limitUsd: data.limit, costUsd: data.cost } });
            break;
        }
      });
    },
  };
}

export type SessionsService = ReturnType<typeof createSessionsService>;

/** The bytes of a data: URL's percent-encoded payload; a malformed escape is the client's mistake (400). */
function percentDecoded(payload: string): Buffer {
  try {
    return Buffer.from(decodeURIComponent(payload));
  } catch {
    throw new ValidationError("a file part's data: URL is not correctly percent-encoded (or use ;base64)");
  }
}
