import { createHash } from 'node:crypto';
import type { Database } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { AuditService } from '../audit/audit.service.js';
import { hasPermission, requirePermission, requireTokenScope, requireUser, tenantOf } from '../../kernel/authz.js';
import type { Ctx, UserActor } from '../../kernel/context.js';
import { ConflictError, ForbiddenError, NotFoundError, RateLimitedError, UpstreamError, ValidationError } from '../../kernel/errors.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import type { RuntimeClient } from '../runtime/runtime-client.js';
import type { RuntimeService } from '../runtime/runtime.service.js';
import { ascendingId, modelRefOf } from '../runtime/runtime-ids.js';
import type { TemplatesRepo } from '../templates/templates.repo.js';
import { mayUseTemplate } from '../templates/templates.service.js';
import { buildParts, checkAgentName, type PromptInput } from './prompt-parts.js';
import type { SessionStreams } from './session-stream.js';
import type { PermissionRequestsRepo } from './permission-requests.repo.js';
import type { SessionRow, SessionsRepo, Viewer } from './sessions.repo.js';
import type { PartialAnswer, StoredEvent, TurnsRepo } from './turns.repo.js';
import { answerText, queueTurn, sendTurnJob } from './session-turns.js';
import { TURN_LOST } from './turn-runner.js';
import { workspaceDir } from '../../lib/data-paths.js';
import type { TurnEvents } from './turn-events.js';
import type { SessionSharesRepo, ShareAccess } from './session-shares.repo.js';
import { handoverContext, withEarlier } from './share-rules.js';

// Names other modules import from here; the rules and jobs they name live beside this file.
export type { PromptFile, PromptInput } from './prompt-parts.js';

/** The error a withdrawn turn is recorded with (it never ran). */
const WITHDRAWN = 'withdrawn before it was sent to the agent';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export function createSessionsService(deps: {
  db: Database;
  repo: SessionsRepo;
  turnsRepo: TurnsRepo;
  permissionRequests: PermissionRequestsRepo;
  templates: TemplatesRepo;
  /** USD the user recorded this calendar month (the monthly cost limit's measure). */
  monthSpent: (tenantId: string, userId: string) => Promise<number>;
  audit: AuditService;
  queue: JobQueue;
  runtime: RuntimeService;
  pool: Pick<RuntimePool, 'client' | 'prestart' | 'runningClient'>;
  streams: SessionStreams;
  clock: Clock;
  /** Makes the owner's workspace directory (the turn runner's, so both agree on what one is). */
  ensureWorkspace: (dir: string) => Promise<void>;
  /** The data dir: each owner's workspace is in it (src/lib/data-paths.ts). */
  dataDir: string;
  limits: { maxFiles: number; maxFileBytes: number };
  demo: { allowAnonymous: boolean; operator: () => Promise<{ tenantId: string; userId: string } | null> };
  /** Told, in the deletion's transaction, that a session goes (learned skills discount its recent turns). */
  events: Pick<TurnEvents, 'within'>;
  /** Sessions shared read-only and handed over (session-shares.service.ts): who else may read, and the earlier conversation. */
  shares?: Pick<SessionSharesRepo, 'accessOf' | 'transcriptOf' | 'latestHandover' | 'contextPending'>;
  /** A person's name as others see it ("Ada Lovelace <ada@…>"), for the earlier conversation's header. */
  nameOf?: (tenantId: string, userId: string | null) => Promise<string>;
}) {
  const { db, repo, turnsRepo, permissionRequests, audit, queue, runtime, pool, streams, clock, ensureWorkspace } = deps;
  const clientOf = (s: SessionRow) => pool.client({ tenantId: s.tenantId, userId: s.ownerId });
  /**
   * Starts a user's runtime ahead of their first prompt (they opened a session's stream), and prepares
   * it: the ~2 s of a cold start and the ~2 s of a first prompt then pass while they type. Best effort:
   * a full host or a failure waits for the prompt, which reports it.
   */
  const warm = (tenantId: string, userId: string) => void pool.prestart({ tenantId, userId }).catch(() => {});

  const userOf = (ctx: Ctx): UserActor => requireUser(ctx, 'sessions');

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

  /**
   * The session the caller may READ: their own (as `owned`), or another person's of their tenant shared
   * with them or their team (session-shares). Only the read routes ask this; everything else stays `owned`,
   * so a viewer meets 404 there, exactly as a stranger does.
   */
  async function readable(ctx: Ctx, id: string, browserSession: string | undefined): Promise<{ session: SessionRow; share: ShareAccess | null }> {
    const v = await viewer(ctx, browserSession);
    const own = await repo.findVisible(db, id, v);
    if (own) return { session: own, share: null };
    const share = deps.shares ? await deps.shares.accessOf(db, v.tenantId, id, v.userId) : null;
    const s = share ? await repo.byId(db, v.tenantId, id) : null;
    if (!share || !s) throw new NotFoundError('session not found');
    return { session: s, share };
  }

  /** Every view of another person's session is audited (opening its transcript or its stream; not each event). */
  async function auditView(ctx: Ctx, s: SessionRow, share: ShareAccess, what: 'transcript' | 'stream'): Promise<void> {
    await db.transaction((tx) => audit.record(tx, ctx, { action: 'session.view', target: `session:${s.id}`, sessionId: s.id, details: { what, shareId: share.shareId, mode: share.mode, via: share.via, ownerId: s.ownerId } }));
  }

  /** Cost limits of the caller's roles, checked before a turn is queued. */
  async function checkCost(actor: UserActor): Promise<void> {
    const { monthly_limit_usd: monthly, per_request_limit_usd: perRequest } = actor.permissions.cost;
    if (perRequest !== undefined && perRequest <= 0) {
      throw new RateLimitedError('your role allows no spending per request', { code: 'cost_limit_exceeded', details: { perRequestLimitUsd: perRequest } });
    }
    if (monthly === undefined) return;
    const now = clock.now();
    const spent = await deps.monthSpent(actor.tenantId, actor.userId);
    if (spent >= monthly) {
      const resetsAt = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
      throw new RateLimitedError(`monthly cost limit reached: $${spent.toFixed(2)} of $${monthly} spent this month`, {
        code: 'cost_limit_exceeded',
        hint: `The limit resets on ${resetsAt.toISOString().slice(0, 10)}; an admin can raise it in your role's cost.monthly_limit_usd.`,
        details: { monthlyLimitUsd: monthly, spentUsd: Math.round(spent * 1e6) / 1e6, resetsAt },
      });
    }
  }

  const publicMessage = (m: { info: Record<string, any>; parts: Array<Record<string, any>> }, s: SessionRow) => {
    const { path: _path, ...info } = m.info;
    // The model an answer ran on, as the tenant names it ("<provider>/<model id>").
    const model = modelRefOf(s.tenantId, info);
    return { info: { ...info, ...(model ? { model } : {}), sessionID: s.id }, parts: m.parts.map((p) => ({ ...p, sessionID: s.id })) };
  };

  async function transcriptOf(s: SessionRow): Promise<PublicMessage[]> {
    return (await transcriptFrom(s, () => clientOf(s))) as PublicMessage[];
  }

  /**
   * The transcript when the owner's runtime runs, null when it does not: for background readers (the
   * search index at a turn's end), which must never start a runtime, least of all a deactivated person's.
   */
  async function runningTranscriptOf(s: SessionRow): Promise<PublicMessage[] | null> {
    return transcriptFrom(s, () => pool.runningClient({ tenantId: s.tenantId, userId: s.ownerId }));
  }

  async function transcriptFrom(s: SessionRow, connect: () => Promise<RuntimeClient | null>): Promise<PublicMessage[] | null> {
    // A handed-over session: the conversation before, kept by the service, then the new owner's runtime's.
    const earlier = ((await deps.shares?.latestHandover(db, s.tenantId, s.id))?.transcript ?? []) as PublicMessage[];
    if (!s.upstreamId) return earlier;
    const client = await connect();
    if (!client) return null;
    const [messages, lost, moves, reverted] = await Promise.all([client.messages(s.upstreamId), turnsRepo.lostTurns(db, s.tenantId, s.id), repo.movesOf(db, s.tenantId, s.id), client.revertState(s.upstreamId)]);
    // Lost turns and moves before the hand-over are in the earlier conversation already.
    const cut = String(earlier.at(-1)?.info.id ?? '');
    const current = withoutReverted(withMoves(withLostTurns(messages.map((m) => publicMessage(m, s)), lost.filter((t) => t.messageId > cut), s.id), moves.filter((m) => m.beforeMessageId > cut), s.id), reverted?.messageId ?? null);
    return withEarlier(earlier, current);
  }

  /**
   * Withdraws a turn not yet handed to the runtime (false when it has been, or is not this session's): the
   * session's next parked turn is queued in the same transaction, the stream told.
   */
  async function withdrawn(ctx: Ctx, s: SessionRow, turnId: string, by: { userId: string; name: string | null }, action: 'turn.withdraw' | 'session.stop'): Promise<boolean> {
    const done = await db.transaction(async (tx) => {
      if (!(await turnsRepo.withdrawTurn(tx, s.tenantId, s.id, turnId, WITHDRAWN))) return false;
      await audit.record(tx, ctx, { action, target: `session:${s.id}`, sessionId: s.id, details: { turnId, withdrawn: true } });
      const next = await turnsRepo.handOn(tx, s.tenantId, s.id);
      if (next) await sendTurnJob(queue, next, { tx });
      return true;
    });
    if (done) {
      ctx.log.info({ turnId, sessionId: s.id }, 'a queued turn was withdrawn');
      await streams.publish(s.id, 'turn.withdrawn', { turnId, by, message: `Withdrawn by ${by.name ?? 'its owner'} before it reached the agent.` }).catch(() => {});
    }
    return done;
  }

  return {
    /** Who the caller is for the session list (SPEC.md sessions rule 1; the list itself: session-manage.ts). */
    viewer,

    /** The caller's cost limits, checked as a prompt checks them (RateLimitedError `cost_limit_exceeded`). */
    checkCost,

    /** Creates a session (agents.create); with a template, snapshots its prompt and model (rule 2). */
    async create(ctx: Ctx, input: { title: string; templateSlug?: string; model?: string; browserSession?: string }): Promise<{ sessionId: string }> {
      const tenantId = requirePermission(ctx, 'agents.create');
      const actor = userOf(ctx);
      const title = input.title.trim();
      if (!title) throw new ValidationError('title must not be empty');
      let snapshot: { systemPrompt: string; model: string | null } | null = null;
      if (input.templateSlug) {
        const t = await deps.templates.find(db, tenantId, input.templateSlug);
        if (!t) throw new NotFoundError(`template "${input.templateSlug}" not found`);
        if (!mayUseTemplate(actor.permissions.agents.use_templates, t.slug)) {
          throw new ForbiddenError(`missing permission agents.use_templates for template "${t.slug}"`, { details: { permission: 'agents.use_templates', template: t.slug } });
        }
        snapshot = { systemPrompt: t.systemPrompt, model: t.model };
      }
      // A model chosen for the session: the person's to choose, checked as each turn is.
      if (input.model) await runtime.checkChoice(tenantId, input.model, actor.permissions);
      const directory = workspaceDir(deps.dataDir, { tenantId, userId: actor.userId });
      await ensureWorkspace(directory);
      // A new session is about to get its first prompt: have the runtime up (or thawed) by then, where
      // prompts can run at all.
      void runtime.resolveModel(tenantId).then(() => warm(tenantId, actor.userId), () => {});
      return db.transaction(async (tx) => {
        const s = await repo.insert(tx, {
          tenantId,
          ownerId: actor.userId,
          title,
          templateSlug: input.templateSlug ?? null,
          systemPrompt: snapshot?.systemPrompt ?? null,
          model: snapshot?.model ?? null,
          chosenModel: input.model || null,
          snapshotAt: snapshot ? clock.now() : null,
          directory,
          channel: ctx.channel,
          browserSession: actor.via === 'demo' && input.browserSession ? sha256(input.browserSession) : null,
        });
        await audit.record(tx, ctx, { action: 'session.create', target: `session:${s.id}`, sessionId: s.id, details: { title, templateSlug: input.templateSlug ?? null, ...(input.model ? { model: input.model } : {}) } });
        return { sessionId: s.id };
      });
    },

    /**
     * The session's transcript, taken from the runtime (SPEC.md Message shape, our session ids). A turn
     * lost with its runtime says so where its answer is (the runtime itself never learns it was cut):
     * its last answer carries the error, or, when it had none yet, an answer of ours with only the error.
     */
    async messages(ctx: Ctx, input: { id: string; browserSession?: string }) {
      const { session: s, share } = await readable(ctx, input.id, input.browserSession);
      // Its title with it: the chat's header names the session without another call.
      const session = { id: s.id, title: s.title };
      if (!share) return { session, messages: await transcriptOf(s) };
      // Shared as of a moment: the transcript kept then, nothing later.
      const messages = share.mode === 'as_of_now' ? ((await deps.shares!.transcriptOf(db, s.tenantId, share.shareId)) as PublicMessage[]) : await transcriptOf(s);
      await auditView(ctx, s, share, 'transcript');
      return { session, messages };
    },

    /** The session the caller may read (theirs, or shared with them), with the share that lets them. */
    readable,

    /**
     * A session's transcript exactly as `messages` shows it, for a caller that has already decided who may
     * read it (a person's data export, privacy.service.ts). Starts the owner's runtime if need be.
     */
    transcriptOf,
    runningTranscriptOf,

    /** The session the caller may act on (SPEC.md rule 3: its owner's, else 404), for the session routes of other files. */
    owned,

    /**
     * Queues an agent turn (SPEC.md rules 3-6): the caller owns the session and may run agents, the
     * runtime is ready, cost limits allow it. The turn, its job and its audit entry commit together.
     */
    async prompt(ctx: Ctx, input: PromptInput & { id: string; browserSession?: string }): Promise<{ jobId: string; sessionId: string; turnId: string; messageId: string }> {
      const tenantId = requirePermission(ctx, 'agents.create');
      const actor = userOf(ctx);
      let s = await owned(ctx, input.id, input.browserSession);
      checkAgentName(input.agent);
      const parts = buildParts(input, deps.limits);
      await checkCost(actor);
      if (s.templateSlug && !s.snapshotAt) {
        // Sessions created before snapshots existed take one now, while the template still exists (rule 5).
        const t = await deps.templates.find(db, tenantId, s.templateSlug);
        if (t) {
          await repo.snapshot(db, tenantId, s.id, { systemPrompt: t.systemPrompt, model: t.model });
          s = { ...s, systemPrompt: t.systemPrompt, model: t.model, snapshotAt: clock.now() };
        }
      }
      // The turn's model (its own, the session's, the template's or the default): refused here when the
      // person may not choose it or it is not served; checked again as the turn goes (turn-runner.ts).
      const model = await runtime.resolveTurnModel(tenantId, { turn: input.model, session: s.chosenModel, template: s.model }, actor.permissions);
      // A handed-over session's first turn since: the earlier conversation goes to the agent with it.
      const handover = deps.shares ? await deps.shares.latestHandover(db, tenantId, s.id) : null;
      const names = handover ? await Promise.all([deps.nameOf?.(tenantId, handover.fromUserId), deps.nameOf?.(tenantId, handover.toUserId)]) : [];
      return db.transaction(async (tx) => {
        const messageId = ascendingId('msg');
        if (handover && (await deps.shares!.contextPending(tx, tenantId, s.id, handover.createdAt))) {
          parts.unshift({ id: ascendingId('prt'), type: 'text', synthetic: true, text: handoverContext(handover.transcript, { from: names[0] ?? 'its previous owner', to: names[1] ?? 'its new owner', folder: handover.folder }) });
        }
        const { turnId, jobId } = await queueTurn(tx, { repo, turnsRepo, queue }, { tenantId, sessionId: s.id, userId: actor.userId, messageId, agent: input.agent ?? null, agentProfileId: input.agentProfileId ?? null, parts, model: input.model || null });
        await audit.record(tx, ctx, {
          action: 'agent.prompt',
          target: `session:${s.id}`,
          sessionId: s.id,
          details: { jobId, turnId, agent: input.agent ?? null, agentProfileId: input.agentProfileId ?? null, files: parts.filter((p) => p.type === 'file').length, model: model.ref, modelSource: model.source },
        });
        return { jobId, sessionId: s.id, turnId, messageId };
      });
    },

    /**
     * Stops what the session's agent is doing (SPEC.md sessions: stop), idempotent: the turn running in the
     * runtime is aborted there (opencode keeps what it had written, and the model call is cut and charged
     * by the LLM gateway as any call whose client hung up), after its waiting permission requests are
     * rejected (a turn waiting on one would otherwise stay parked on it); a turn still on its way to the
     * runtime is withdrawn before it gets there. The stream says `turn.stopped`, and who, before the
     * runtime's own end of the turn. Prompts queued behind it stay queued (withdraw them one by one).
     * Only for whoever may prompt the session; a stop that finds nothing running says so (200).
     */
    async stop(ctx: Ctx, input: { id: string; browserSession?: string }): Promise<{ stopped: boolean; turnId: string | null; withdrawn: boolean; message: string }> {
      requirePermission(ctx, 'agents.create');
      const actor = userOf(ctx);
      const s = await owned(ctx, input.id, input.browserSession);
      const by = { userId: actor.userId, name: actor.profile?.displayName || actor.profile?.handle || null };
      const started = Date.now();
      const finish = async (turnId: string | null, running: boolean) => {
        await db.transaction((tx) =>
          audit.record(tx, ctx, { action: 'session.stop', target: `session:${s.id}`, sessionId: s.id, durationMs: Date.now() - started, details: { turnId, running } }),
        );
      };
      // A turn an attempt is handing over right now reaches the runtime within moments (at most the 10 s
      // a runtime call may take): it is stopped there once it has.
      let turn = await turnsRepo.currentTurn(db, s.tenantId, s.id);
      for (const deadline = Date.now() + 12_000; turn && turn.status !== 'sent' && turn.handing && Date.now() < deadline; ) {
        await new Promise((r) => setTimeout(r, 50));
        turn = await turnsRepo.currentTurn(db, s.tenantId, s.id);
      }
      if (turn && turn.status !== 'sent') {
        if (await withdrawn(ctx, s, turn.id, by, 'session.stop')) {
          return { stopped: true, turnId: turn.id, withdrawn: true, message: 'The prompt had not reached the agent yet: it was withdrawn.' };
        }
        turn = await turnsRepo.currentTurn(db, s.tenantId, s.id);
      }
      // A first turn binds the session to its runtime session as it is sent: read again when not bound yet.
      if (!s.upstreamId) s.upstreamId = (await repo.byId(db, s.tenantId, s.id))?.upstreamId ?? null;
      // Never starts a runtime: one that does not run runs nothing.
      const client = s.upstreamId ? await pool.runningClient({ tenantId: s.tenantId, userId: s.ownerId }) : null;
      // The runtime's word, not our records: a turn whose end went unseen is still 'sent' there.
      const busy = client && s.upstreamId ? (await client.busySessions()).includes(s.upstreamId) : false;
      if (!client || !s.upstreamId || !busy) {
        await finish(null, false);
        return { stopped: false, turnId: null, withdrawn: false, message: 'Nothing was running in this session.' };
      }
      // Said first, so that the stream reads who stopped the turn before the runtime's own end of it.
      const [, waiting] = await Promise.all([
        streams.publish(s.id, 'turn.stopped', { turnId: turn?.id ?? null, by, message: `Stopped by ${by.name ?? 'its owner'}.` }),
        permissionRequests.pendingPermissionRequests(db, s.tenantId, s.id),
      ]);
      for (const p of waiting) {
        if (!(await permissionRequests.takeFamilyPermissionRequest(db, s.tenantId, s.id, p.id))) continue;
        await client.replyPermission(p.id, 'reject', 'The person stopped the turn.').catch((err) => ctx.log.warn({ err: (err as Error).message }, 'could not reject a permission request of a stopped turn'));
      }
      // The prompts the runtime holds behind the turn (sent while it ran) would be dropped with it: they are
      // taken back first (a sweep cannot send them before the abort: they wait for the one it ends), and
      // sent again once it is stopped, in their order.
      const later = turn?.status === 'sent' ? await turnsRepo.takeBackLaterTurns(db, s.tenantId, s.id, turn.id) : 0;
      try {
        await client.abort(s.upstreamId);
      } catch (err) {
        // The stream said it was stopped: it hears that it was not, and why.
        await streams.publish(s.id, 'session.error', { error: { name: 'StopFailed', message: `The turn could not be stopped: ${(err as Error).message}` } }).catch(() => {});
        throw err;
      }
      if (later) {
        await db.transaction(async (tx) => {
          const next = await turnsRepo.handOn(tx, s.tenantId, s.id);
          if (next) await sendTurnJob(queue, next, { tx });
        });
      }
      // A plan's subtasks run in child sessions of their own: what runs there is the plan's (cancel the plan).
      await finish(turn?.id ?? null, true);
      return { stopped: true, turnId: turn?.id ?? null, withdrawn: false, message: later ? `The turn was stopped; the ${later === 1 ? 'prompt' : `${later} prompts`} sent after it go${later === 1 ? 'es' : ''} next.` : 'The turn was stopped.' };
    },

    /**
     * Withdraws a prompt of the session not yet sent to the runtime (its model never sees it): 409 once it
     * has been sent (stop it instead), 404 for a turn not of this session. Audited; the stream says
     * `turn.withdrawn`, and the session's next prompt goes.
     */
    async withdraw(ctx: Ctx, input: { id: string; turnId: string; browserSession?: string }): Promise<{ withdrawn: true; turnId: string }> {
      requirePermission(ctx, 'agents.create');
      const actor = userOf(ctx);
      const s = await owned(ctx, input.id, input.browserSession);
      const by = { userId: actor.userId, name: actor.profile?.displayName || actor.profile?.handle || null };
      if (!(await withdrawn(ctx, s, input.turnId, by, 'turn.withdraw'))) {
        const t = await turnsRepo.turnOf(db, s.tenantId, s.id, input.turnId);
        if (!t) throw new NotFoundError('turn not found');
        if (t.status === 'failed' && t.error === WITHDRAWN) return { withdrawn: true, turnId: t.id };
        throw new ConflictError(t.status === 'failed' || t.status === 'lost' ? `the turn has ended (${t.status})` : 'the turn was already sent to the agent; stop it instead (POST /v1/sessions/:id/stop)', {
          code: 'turn_already_sent',
          details: { status: t.status },
        });
      }
      return { withdrawn: true, turnId: input.turnId };
    },

    /**
     * Starts and prepares the caller's runtime ahead of a prompt (the dashboard asks as it opens, a
     * client may ask before its first prompt of the day), or thaws it: returns at once, the start goes
     * on. Only for those who may prompt, and only where prompts can run (runtime_not_ready otherwise).
     */
    async prepare(ctx: Ctx): Promise<{ preparing: true }> {
      const tenantId = requirePermission(ctx, 'agents.create');
      const actor = userOf(ctx);
      await runtime.resolveModel(tenantId);
      await ensureWorkspace(workspaceDir(deps.dataDir, { tenantId, userId: actor.userId }));
      warm(tenantId, actor.userId);
      return { preparing: true };
    },

    /**
     * Checks the caller may watch the session's event stream; the adapter then subscribes. A client
     * resuming (`lastEventId`) also gets how the session's recent turns ended, as recorded with them: the
     * serve it reconnects to may have started since (its replay buffer is its own) and never seen it.
     */
    async openStream(ctx: Ctx, input: { id: string; browserSession?: string; lastEventId?: string }): Promise<{ sessionId: string; ends: StoredEvent[]; viewer: string | null }> {
      const { session: s, share } = await readable(ctx, input.id, input.browserSession);
      if (share?.mode === 'as_of_now') {
        throw new ForbiddenError(`this session was shared with you as of ${share.asOf.toISOString()}: read its transcript; it has no live stream for you`, { code: 'share_not_live', details: { mode: share.mode } });
      }
      if (share) await auditView(ctx, s, share, 'stream');
      // A session with a transcript may have a turn running: have its owner's runtime up to hear it. A
      // person who can prompt and opens a stream is about to: start theirs while they type (not a viewer).
      if (s.upstreamId || (!share && ctx.actor.kind === 'user' && hasPermission(ctx.actor.permissions, 'agents.create'))) warm(s.tenantId, s.ownerId);
      const ends = input.lastEventId ? (await turnsRepo.recentEndEvents(db, s.tenantId, s.id)).filter((e) => e.id > input.lastEventId!) : [];
      // A viewer's stream ends when their share does (session-stream.ts recheck).
      return { sessionId: s.id, ends, viewer: share && ctx.actor.kind === 'user' ? ctx.actor.userId : null };
    },

    /**
     * The tool permission requests of this session (and of its child sessions: a plan's subtasks ask
     * through their parent) still waiting for an answer, oldest first: what a client shows again after
     * it reconnects or reloads, rather than only what it happened to see on the stream.
     */
    async pendingPermissions(ctx: Ctx, input: { id: string; browserSession?: string }): Promise<{ permissions: Array<{ id: string; sessionId: string; permission: string; patterns: string[]; askedAt: Date }> }> {
      const s = await owned(ctx, input.id, input.browserSession);
      return { permissions: await permissionRequests.pendingPermissionRequests(db, s.tenantId, s.id) };
    },

    /**
     * Answers a pending tool permission request of this session (rule 7), upstream, and audits the
     * decision. The request must be one the runtime asked in this session, or in one of its child
     * sessions (a plan's subtasks ask through their parent: orchestrator), recorded from its events and
     * not answered yet; of concurrent replies one is delivered, the others are 404. When the runtime does
     * not take the reply, the turn would wait for it forever: it is stopped, the stream gets a
     * session.error, and the answer is 502.
     */
    async replyPermission(ctx: Ctx, input: { id: string; permissionId: string; response: string; browserSession?: string }): Promise<{ ok: true }> {
      requireTokenScope(ctx, 'sessions');
      const s = await owned(ctx, input.id, input.browserSession);
      if (!['once', 'always', 'reject'].includes(input.response)) throw new ValidationError('response must be once, always or reject');
      const pending = await permissionRequests.takeFamilyPermissionRequest(db, s.tenantId, s.id, input.permissionId);
      if (!pending) throw new NotFoundError('permission request not found (unknown, or already answered)');
      // The session that asked: this one, or a child (its runtime session is what a failed reply stops).
      const asker = pending.sessionId === s.id ? s : ((await repo.byId(db, s.tenantId, pending.sessionId)) ?? s);
      let replied: boolean;
      try {
        replied = await (await clientOf(s)).replyPermission(pending.id, input.response as 'once' | 'always' | 'reject');
      } catch (err) {
        const why = (err as Error).message;
        ctx.log.error({ err: why, sessionId: s.id, permission: pending.permission }, 'permission reply not delivered; stopping the turn');
        // Said first, so the owner reads why before the runtime reports the turn aborted.
        await streams.publish(s.id, 'session.error', { error: { name: 'PermissionReplyFailed', message: `Your answer to the ${pending.permission} request could not be delivered to the agent runtime, so the turn was stopped (${why}).` } });
        if (asker.upstreamId) await clientOf(s).then((c) => c.abort(asker.upstreamId!)).catch(() => {});
        await db.transaction((tx) =>
          audit.record(tx, ctx, { action: 'permission.reply_failed', target: `tool:${pending.permission}`, sessionId: s.id, details: { permissionId: pending.id, response: input.response, error: why } }),
        );
        throw new UpstreamError('the agent runtime did not take the reply; the turn was stopped', { code: 'upstream_failed', details: { permission: pending.permission } });
      }
      if (!replied) throw new NotFoundError('permission request not found (unknown, or already answered)');
      await db.transaction((tx) =>
        audit.record(tx, ctx, {
          action: 'permission.reply',
          target: `tool:${pending.permission}`,
          sessionId: s.id,
          details: { permissionId: pending.id, response: input.response, ...(asker.id !== s.id ? { askedIn: asker.id } : {}) },
        }),
      );
      return { ok: true };
    },

    /** Removes the session from the owner's index (rule 8); the runtime keeps the transcript. */
    async remove(ctx: Ctx, input: { id: string; browserSession?: string }): Promise<void> {
      requireTokenScope(ctx, 'sessions');
      const s = await owned(ctx, input.id, input.browserSession);
      await db.transaction(async (tx) => {
        // Concurrent deletes of one session: only the one that marks it deleted goes on; the others are 404.
        if (!(await repo.softDelete(tx, s.tenantId, s.id))) throw new NotFoundError('session not found');
        await deps.events.within('session.deleting', { tx, tenantId: s.tenantId, sessionId: s.id });
        await audit.record(tx, ctx, { action: 'session.delete', target: `session:${s.id}`, sessionId: s.id, details: {} });
      });
      await streams.publish(s.id, 'session.deleted', { info: { id: s.id, title: s.title } });
    },

    /**
     * Removes a session for good, wherever it is held: first from its owner's index exactly as `remove`
     * does (the same hooks, `session.delete` audit entry and stream event, when it was still listed), then
     * from the runtime's own store (opencode's session with its messages, and its child sessions'), then
     * its rows (turns, permission requests, child sessions, trajectories, plans). For the operator, and
     * for admins who may manage the tenant or its users: retention (retention.service.ts) and a person's
     * erasure use it. A session with a turn in flight is left alone ('running'); when the runtime cannot
     * be reached it throws, the session stays out of its owner's index, and a later call finishes it.
     */
    async purge(ctx: Ctx, input: { tenantId: string; id: string; reason: string }): Promise<'removed' | 'running' | 'gone'> {
      if (ctx.actor.kind !== 'system') {
        const tenantId = tenantOf(ctx);
        if (ctx.actor.kind !== 'user' || tenantId !== input.tenantId || !(hasPermission(ctx.actor.permissions, 'admin.manage_tenant') || hasPermission(ctx.actor.permissions, 'admin.manage_users'))) {
          throw new ForbiddenError('missing permission admin.manage_tenant', { details: { permission: 'admin.manage_tenant' } });
        }
      }
      const found = await repo.withChildren(db, input.tenantId, input.id);
      if (!found) return 'gone';
      const s = found.session;
      if (await repo.turnInFlight(db, s.tenantId, s.id)) return 'running';
      const wasListed = await db.transaction(async (tx) => {
        if (!(await repo.softDelete(tx, s.tenantId, s.id))) return false;
        await deps.events.within('session.deleting', { tx, tenantId: s.tenantId, sessionId: s.id });
        await audit.record(tx, ctx, { action: 'session.delete', target: `session:${s.id}`, sessionId: s.id, details: { reason: input.reason } });
        return true;
      });
      if (wasListed) await streams.publish(s.id, 'session.deleted', { info: { id: s.id, title: s.title } });
      const upstream = [...found.childUpstreamIds, ...(s.upstreamId ? [s.upstreamId] : [])];
      let runtimeRemoved = 0;
      if (upstream.length) {
        const client = await clientOf(s);
        const busy = new Set(await client.busySessions());
        if (upstream.some((u) => busy.has(u))) return 'running';
        for (const u of upstream) if (await client.deleteSession(u)) runtimeRemoved++;
      }
      return db.transaction(async (tx) => {
        if (!(await repo.purgeRows(tx, s.tenantId, s.id))) return (await repo.byId(tx, s.tenantId, s.id)) ? 'running' : 'gone';
        await audit.record(tx, ctx, { action: 'session.purge', target: `session:${s.id}`, sessionId: s.id, details: { reason: input.reason, runtimeSessions: runtimeRemoved } });
        return 'removed';
      });
    },

    /** Takes over a demo-mode session this browser created before signing in (rule 1). */
    async claim(ctx: Ctx, input: { id: string; browserSession?: string }): Promise<{ sessionId: string; claimed: boolean }> {
      requireTokenScope(ctx, 'sessions');
      const actor = userOf(ctx);
      const s = await owned(ctx, input.id, input.browserSession);
      if (s.ownerId === actor.userId) return { sessionId: s.id, claimed: false };
      await db.transaction(async (tx) => {
        // The transcript lives in the previous owner's runtime, which the new owner's agent must not reach:
        // the session continues in the new owner's runtime and workspace, from a fresh runtime session.
        await repo.claim(tx, s.tenantId, s.id, actor.userId, workspaceDir(deps.dataDir, { tenantId: s.tenantId, userId: actor.userId }));
        await audit.record(tx, ctx, { action: 'session.claim', target: `session:${s.id}`, sessionId: s.id, details: { from: s.ownerId } });
      });
      return { sessionId: s.id, claimed: true };
    },

    /** The last completed assistant answer of a session, as text (system use: chat gateways reply with it). */
    async lastAnswer(ctx: Ctx, input: { id: string }): Promise<{ messageId: string; text: string } | null> {
      if (ctx.actor.kind !== 'system') throw new ForbiddenError('only the system reads answers for relaying');
      const s = await repo.byId(db, tenantOf(ctx), input.id);
      if (!s?.upstreamId) return null;
      const messages = await (await clientOf(s)).messages(s.upstreamId);
      const last = [...messages].reverse().find((m) => m.info.role === 'assistant' && m.info.time.completed);
      if (!last) return null;
      return { messageId: last.info.id, text: answerText(last) };
    },
  };
}

export type SessionsService = ReturnType<typeof createSessionsService>;

type PublicMessage = { info: Record<string, any>; parts: Array<Record<string, any>> };

/**
 * A transcript as it reads after an undo (session-changes.ts): the turns from the one undone on are gone
 * from it, as the runtime drops them at the next prompt (until then it keeps them, for a redo). Message ids
 * ascend, and the notices of lost turns sort right after their prompt's.
 */
function withoutReverted(messages: PublicMessage[], revertedTo: string | null): PublicMessage[] {
  return revertedTo ? messages.filter((m) => String(m.info.id) < revertedTo) : messages;
}

/**
 * A transcript with a notice where the session's runtime session was started anew on another runner host
 * (turn-runner.ts, runtime.moved): the turns before it ran on a host that was lost and are not in this
 * runtime's transcript. The notice is an assistant message with only an error (as a lost turn's), so it
 * is shown, never silently missing: just before the first prompt sent to the new runtime session.
 */
export function withMoves(messages: PublicMessage[], moves: Array<{ beforeMessageId: string; turns: number; at: Date }>, sessionId: string): PublicMessage[] {
  if (!moves.length) return messages;
  const out = [...messages];
  for (const m of moves) {
    if (m.turns < 1) continue;
    const at = out.findIndex((x) => x.info.id >= m.beforeMessageId);
    const created = m.at.getTime();
    const earlier = m.turns === 1 ? 'The earlier turn' : `The ${m.turns} earlier turns`;
    const message = `${earlier} of this conversation ran on a runner host that was lost; ${m.turns === 1 ? 'its messages' : 'their messages'} and your files stayed on that host (an operator can recover them if it comes back). The conversation went on from here on another host, in a fresh workspace.`;
    out.splice(at < 0 ? out.length : at, 0, {
      info: { id: `${m.beforeMessageId}_moved`, sessionID: sessionId, role: 'assistant', time: { created, completed: created }, error: { name: 'RuntimeMoved', data: { message, code: 'runtime_moved', turns: m.turns } } },
      parts: [],
    });
  }
  return out;
}

/**
 * A transcript with its lost turns marked (SPEC.md Message shape: an assistant message's `error` is
 * `{ name, data: { message } }`, as the runtime writes its own): the last answer to each lost turn's
 * prompt gets the error unless the runtime wrote one; a lost turn with no answer gets one of ours, right
 * after its prompt (or where its id sorts, when the runtime never stored the prompt). What the answer had
 * streamed when it was cut (`partial`, which the runtime did not store) is put back in its text parts: the
 * person had read it.
 */
export function withLostTurns(messages: PublicMessage[], lost: Array<{ id: string; messageId: string; error: string; sentAt: Date; partial?: PartialAnswer | null }>, sessionId: string): PublicMessage[] {
  if (!lost.length) return messages;
  const out = [...messages];
  for (const t of lost) {
    const error = { name: 'TurnLost', data: { message: t.error, code: TURN_LOST } };
    const streamed = (t.partial ?? []).filter((m) => m.parts.some((p) => p.text));
    // Each answer message the runtime kept gets back the text it streamed; one it never stored is added.
    for (const m of streamed) {
      const i = out.findIndex((x) => x.info.id === m.messageId);
      if (i >= 0) {
        out[i] = withStreamedText(out[i], m, sessionId);
        continue;
      }
      const at = out.findIndex((x) => x.info.id > m.messageId);
      const created = t.sentAt.getTime();
      const kept = withStreamedText({ info: { id: m.messageId, sessionID: sessionId, role: 'assistant', parentID: t.messageId, time: { created } }, parts: [] }, m, sessionId);
      out.splice(at < 0 ? out.length : at, 0, kept);
    }
    const answers = out.map((m, i) => ({ m, i })).filter(({ m }) => m.info.role === 'assistant' && m.info.parentID === t.messageId);
    const last = answers.at(-1);
    if (last) {
      if (!last.m.info.error) out[last.i] = { ...last.m, info: { ...last.m.info, error } };
      continue;
    }
    const after = out.findIndex((m) => m.info.id > t.messageId);
    const created = t.sentAt.getTime();
    out.splice(after < 0 ? out.length : after, 0, { info: { id: `${t.messageId}_lost`, sessionID: sessionId, role: 'assistant', parentID: t.messageId, time: { created, completed: created }, error }, parts: [] });
  }
  return out;
}

/** An answer message with the text each of its parts streamed, where the runtime kept less of it (or not the part). */
function withStreamedText(m: PublicMessage, streamed: PartialAnswer[number], sessionId: string): PublicMessage {
  const parts = [...m.parts];
  for (const p of streamed.parts) {
    if (!p.text) continue;
    const i = parts.findIndex((x) => x.id === p.id);
    if (i < 0) parts.push({ id: p.id, messageID: m.info.id, sessionID: sessionId, type: 'text', text: p.text });
    else if (typeof parts[i].text !== 'string' || parts[i].text.length < p.text.length) parts[i] = { ...parts[i], text: p.text };
  }
  return { ...m, parts };
}
