import { randomUUID } from 'node:crypto';
import type { Database, Queryable, Tx } from '../../db/database.js';
import type { Ctx, UserActor } from '../../kernel/context.js';
import { AppError, RateLimitedError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/logger.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import type { AuditService } from '../audit/audit.service.js';
import type { GitCredentials } from '../connectors/git-credentials.js';
import type { GitHostRow, GitHostsRepo } from '../connectors/git-hosts.repo.js';
import { JobAlreadyQueuedError, type JobInfo, type JobQueue } from '../jobs/job-queue.js';
import type { RuntimeClient } from '../runtime/runtime-client.js';
import type { SessionRow } from '../sessions/sessions.repo.js';
import type { UsersRepo } from '../users/users.repo.js';
import { apiBaseOf, tokenOfAuthorization } from './codehost-api-fns.js';
import { createCodeHostApi } from './codehost-api.js';
import { AUDIT, CODE_HOST_RUN_JOB, type CodeHostApi, type CodeHostKind, type CodeHostReplyJob, type CodeHostRunJob, type RepoRef } from './codehost-contract.js';
import { answerText, branchFor, cloneDirFor, composePrompt, filesInClone, sessionTitle, summaryComment, workingText, type AnswerKind, type ChangedFile } from './codehost-run-fns.js';
import type { CodeHostRunRow, CodeHostRunsRepo } from './codehost-runs.repo.js';
import { refusalText } from './codehost-webhook-fns.js';
import { cloneInSandbox, finishInSandbox } from './sandbox-git.js';

/** A turn of a code-host session ended (or failed): the commit, push, pull request and answer (B internal). */
export const CODE_HOST_TURN_END_JOB = 'codehost-turn-end';
export interface CodeHostTurnEndJob {
  tenantId: string;
  runId: string;
  /** The failed turn (turn.failed); null for a turn that ended (turn.ended): the run's last turn. */
  turnId: string | null;
  eventId: string;
}
/** How long a turn's end waits for the workspace snapshot after it (its changed files) to be taken. */
const SNAPSHOT_WAIT_MS = 30_000;
const JOB = { retryLimit: 5 };
/** A trigger on a run another delivery works on comes back this much later (codehost-runs.repo.ts claim). */
const BUSY_RUN_RETRY_S = 5;
/** The queue's last attempt of a job (the intake queues codehost-run with the same retryLimit). */
const lastTry = (attempt: JobInfo | undefined) => (attempt?.retryCount ?? 0) >= JOB.retryLimit;
/** What the host may read of a failure: our own errors' words (they carry no token), else nothing of the internals. */
const failureText = (err: unknown) => (err instanceof AppError ? err.message : 'an internal error (logged on the service)');

/**
 * A code-host run and its result: an issue or review comment handed to a person's agent (queued by the
 * webhook intake, codehost-intake.service.ts) becomes a turn in a session of theirs; when the turn ends
 * the service commits and pushes what changed (inside their sandbox: sandbox-git.ts) to the branch it
 * chose, opens (or finds) the pull request, and answers on the host: a summary with the files and cost,
 * or what happened instead. Every step is safe to run twice (pg-boss retries, two serves): the run row
 * is unique per target, its session set once, every comment on the host claimed once in the event
 * ledger, the pull request looked up before it is opened.
 */
export function createCodeHostRuns(deps: {
  db: Database;
  repo: CodeHostRunsRepo;
  hosts: GitHostsRepo;
  credentials: GitCredentials;
  users: UsersRepo;
  actorOf: (tenantId: string, userId: string) => Promise<{ roles: string[]; permissions: RbacPermissions }>;
  sessions: {
    create(ctx: Ctx, input: { title: string }): Promise<{ sessionId: string }>;
    prompt(ctx: Ctx, input: { id: string; text: string }): Promise<{ turnId: string; messageId: string }>;
    checkCost(actor: UserActor): Promise<void>;
  };
  /** How a turn ended, from the transcript (session-turns.ts turnOutcome): its answer, or the error it ended on. */
  outcome: (s: SessionRow, turnId: string) => Promise<{ done: false } | { done: true; error: string | null; text: string }>;
  sessionsRepo: { byId(q: Queryable, tenantId: string, id: string): Promise<SessionRow | null> };
  ledger: { claimLedgerKey(q: Tx, key: string): Promise<boolean> };
  changes: { list(ctx: Ctx, input: { id: string; messageId?: string }): Promise<{ files: ChangedFile[]; pending: boolean }> };
  runtimeClient: (owner: { tenantId: string; userId: string }) => Promise<RuntimeClient>;
  /** The person's runtime is in use (a command of ours runs in it): not idle, not frozen. */
  keepAwake?: (userId: string) => void;
  audit: AuditService;
  queue: JobQueue;
  publicUrl: string;
  /** The runtime tools that ask the person before each use (AGENTWS_RUNTIME_ASK_TOOLS): the host is told where to answer. */
  askTools?: readonly string[];
  log: Logger;
  /** Tests: another REST client (default: createCodeHostApi over fetch). */
  apiOf?: (kind: CodeHostKind, apiBase: string, token: string, webBase: string) => CodeHostApi;
}) {
  const { db, repo, audit, queue, log } = deps;
  // The dashboard's own address of the session (its routes are in the fragment: /sessions/<id> is no page).
  const sessionUrl = (id: string) => `${deps.publicUrl}/#/sessions/${id}`;
  const claim = (key: string) => db.transaction((tx) => deps.ledger.claimLedgerKey(tx, key));

  /**
   * The host's API as the person (their own connection, where the host takes them), else the service's
   * credential or the GitHub App's installation token: the same choice the git gateway makes for their
   * pushes, so the pull request is opened by the account that pushed. Null (logged) when there is none.
   */
  async function apiFor(host: GitHostRow, kind: CodeHostKind, userId: string | null): Promise<{ api: CodeHostApi; as: 'user' | 'service' } | null> {
    // No person (a refusal for someone unmapped): a user id no connection has, so the service's credential.
    const cred = await deps.credentials.forAgent(host, userId ?? '00000000-0000-0000-0000-000000000000');
    if ('refused' in cred) {
      log.warn({ host: host.name, why: cred.refused }, 'code host: no credential to answer with');
      return null;
    }
    const token = tokenOfAuthorization(cred.authorization);
    if (!token) return null;
    const base = apiBaseOf(kind, host.baseUrl, host.app?.apiUrl);
    const make = deps.apiOf ?? ((k, b, t, w) => createCodeHostApi(k, b, t, { webBase: w }));
    return { api: make(kind, base, token, host.baseUrl), as: cred.as };
  }

  async function userCtx(tenantId: string, userId: string, log: Logger): Promise<Ctx & { actor: UserActor }> {
    const { roles, permissions } = await deps.actorOf(tenantId, userId);
    const actor: UserActor = { kind: 'user', userId, tenantId, roles, permissions, via: 'codehost' };
    return { tenantId, actor, requestId: randomUUID(), log, channel: 'codehost' };
  }

  /** Why the person's cost limits refuse a turn now (sessions.checkCost, the check a prompt makes), or null. */
  async function costRefusal(actor: UserActor): Promise<string | null> {
    try {
      await deps.sessions.checkCost(actor);
      return null;
    } catch (err) {
      if (err instanceof RateLimitedError && err.code === 'cost_limit_exceeded') return err.message;
      throw err;
    }
  }

  /** A comment on the host, at most once per key (the ledger claim comes first: a retry never posts twice). */
  async function commentOnce(key: string, api: CodeHostApi, ref: RepoRef, target: { type: 'issue' | 'pull_request'; number: number }, body: string): Promise<void> {
    if (!(await claim(key))) return;
    await api.comment(ref, target, body);
  }

  const refOf = (r: Pick<CodeHostRunRow, 'repo' | 'projectId'>): RepoRef => ({ repo: r.repo, projectId: r.projectId });
  const targetOf = (r: CodeHostRunRow) => ({ type: r.targetType, number: r.targetNumber });
  const cloneUrl = (host: GitHostRow, repo: string) => `${host.baseUrl}/${repo}.git`;

  return {
    /**
     * A queued trigger (CodeHostRunJob): tell the host at once, find or start the run and its session,
     * clone the repository in the person's sandbox, and hand the agent its prompt.
     */
    async runJob(jobCtx: Ctx, job: CodeHostRunJob, attempt?: JobInfo): Promise<void> {
      const { tenantId, hostId, deliveryRowId, person } = job;
      let { trigger } = job;
      const jlog = jobCtx.log.child({ part: 'codehost', delivery: deliveryRowId });
      const host = await deps.hosts.findById(db, tenantId, hostId);
      const user = await deps.users.findById(db, tenantId, person.userId);
      const ref: RepoRef = { repo: trigger.repo, projectId: trigger.projectId };
      const asked = { type: trigger.target.type, number: trigger.target.number };
      if (!host) return;
      if (!user || user.deactivatedAt) {
        // Deactivated (or removed) since the delivery was accepted: said on the host, with the service's credential.
        const service = await apiFor(host, trigger.kind, null);
        if (service) await commentOnce(`codehost:answer:${deliveryRowId}`, service.api, ref, asked, answerText('refused', { sessionUrl: null, detail: 'the person this was mapped to is no longer active in this workspace' }));
        return;
      }
      const conn = await apiFor(host, trigger.kind, user.id);
      if (!conn) return;
      const { api } = conn;
      let claimed: string | null = null;
      // Seen: a reaction on what asked, once, also when the run must wait for another request first.
      const react = async () => {
        if (!(await claim(`codehost:react:${deliveryRowId}`))) return;
        await api.react(ref, asked, trigger.comment?.id ?? null, 'eyes').catch((err) => jlog.warn({ err: (err as Error).message }, 'code host: the reaction failed'));
      };
      try {
        const ctx = await userCtx(tenantId, user.id, jlog);

        // A comment on a pull request's conversation carries no head (GitHub's and Gitea's issue_comment):
        // read from the host, and a fork's pull request refused here, as the intake refuses those it can see.
        if (trigger.target.type === 'pull_request' && !trigger.head) {
          const pr = await api.pullRequestHead(ref, trigger.target.number);
          if (pr.fromFork) {
            if (await claim(`codehost:answer:${deliveryRowId}`)) {
              await db.transaction((tx) =>
                audit.record(tx, ctx, { action: AUDIT.refused, target: `codehost:${host.name}/${trigger.repo}#${trigger.target.number}`, details: { reason: 'fork', repo: trigger.repo, deliveryRowId } }),
              );
              await api.comment(ref, asked, refusalText('fork', { login: trigger.actor.login, mention: host.mention, label: host.triggerLabel }));
            }
            return;
          }
          trigger = { ...trigger, head: pr.head };
        }

        // The run: the one asked on this target before, or the one whose pull request this is, or a new one.
        let run =
          (await repo.byTarget(db, tenantId, hostId, trigger.repo, trigger.target.type, trigger.target.number)) ??
          (trigger.target.type === 'pull_request' ? await repo.byPullRequest(db, tenantId, hostId, trigger.repo, trigger.target.number) : null);
        if (!run) {
          const choice = branchFor({ branchPrefix: host.branchPrefix, handle: user.handle, trigger });
          if ('error' in choice) {
            await commentOnce(`codehost:answer:${deliveryRowId}`, api, ref, asked, answerText('refused', { sessionUrl: null, detail: choice.error }));
            return;
          }
          run = await repo.insertOrGet(db, {
            tenantId, hostId, userId: user.id, repo: trigger.repo, projectId: trigger.projectId, targetType: trigger.target.type, targetNumber: trigger.target.number,
            targetUrl: trigger.target.url, branch: choice.branch, base: choice.base,
          });
        }
        // Asked again on the same issue by someone else: the run (its session, branch) is its first person's.
        if (run.userId !== user.id) {
          await commentOnce(`codehost:answer:${deliveryRowId}`, api, ref, asked, answerText('refused', { sessionUrl: null, detail: 'another person\'s agent works on this already; ask them, or open a new issue' }));
          return;
        }
        // A retry of a delivery whose turn was handed over already.
        if (run.lastDeliveryRowId === deliveryRowId && run.lastTurnId) return;
        // Another delivery works on this run (cloning, its turn working, or its end not yet pushed): the run's
        // folder is its own and the agent's until then. This one waits and comes back.
        if (!(await repo.claim(db, tenantId, run.id, deliveryRowId))) {
          await react();
          await queue.send(CODE_HOST_RUN_JOB, job, { ...JOB, startAfterSeconds: BUSY_RUN_RETRY_S, singletonKey: `codehost:${deliveryRowId}:wait:${Date.now()}` });
          jlog.info({ runId: run.id }, 'code host run: another request works on this run; this one follows it');
          return;
        }
        claimed = run.id;
        const followUp = run.sessionId !== null;

        const refused = await costRefusal(ctx.actor);
        if (refused) {
          if (!run.sessionId) await repo.update(db, tenantId, run.id, { status: 'refused' });
          if (await claim(`codehost:answer:${deliveryRowId}`)) {
            await db.transaction((tx) =>
              audit.record(tx, ctx, { action: AUDIT.refused, target: `codehost:${host.name}/${trigger.repo}#${trigger.target.number}`, details: { reason: 'cost_limit', detail: refused, deliveryRowId } }),
            );
            await api.comment(ref, asked, answerText('cost_limit', { sessionUrl: null, detail: refused }));
          }
          return;
        }

        // The session: made once per run (a retry finds it), marked in the sessions list with the link.
        let sessionId = run.sessionId && (await deps.sessionsRepo.byId(db, tenantId, run.sessionId)) ? run.sessionId : null;
        if (!sessionId) {
          sessionId = (await deps.sessions.create(ctx, { title: sessionTitle(trigger) })).sessionId;
          const sid = sessionId;
          await db.transaction(async (tx) => {
            await repo.update(tx, tenantId, run!.id, { sessionId: sid });
            await repo.markSession(tx, tenantId, sid, { url: run!.targetUrl || trigger.target.url, label: `${trigger.repo}#${run!.targetNumber}` });
          });
        }

        // Told at once, before the clone: a reaction on what asked, and the session's link.
        await react();
        if (await claim(`codehost:ack:${deliveryRowId}`)) {
          await api.comment(ref, asked, workingText(sessionUrl(sessionId), deps.askTools ?? [])).catch((err) => jlog.warn({ err: (err as Error).message }, 'code host: the "working on it" comment failed'));
        }

        const dir = cloneDirFor(host.name, run.repo, run.targetNumber);
        const startFrom = run.prNumber !== null || trigger.head?.ref === run.branch ? run.branch : run.base;
        const client = await deps.runtimeClient({ tenantId, userId: user.id });
        const cloned = await cloneInSandbox(client, { dir, url: cloneUrl(host, run.repo), startFrom, branch: run.branch }, () => deps.keepAwake?.(user.id));
        if (!cloned.ok) {
          await repo.update(db, tenantId, run.id, { status: run.prNumber ? 'opened' : 'failed', lastDeliveryRowId: deliveryRowId });
          await commentOnce(`codehost:answer:${deliveryRowId}`, api, ref, asked, answerText('failed', { sessionUrl: sessionUrl(sessionId), detail: `the repository could not be cloned: ${cloned.detail}` }));
          return;
        }

        const text = composePrompt({ trigger, person: user.displayName || user.handle, dir, branch: run.branch, followUp });
        let turn: { turnId: string };
        try {
          turn = await deps.sessions.prompt(ctx, { id: sessionId, text });
        } catch (err) {
          if (!(err instanceof AppError) || err.status >= 500) throw err;
          const costly = err instanceof RateLimitedError && err.code === 'cost_limit_exceeded';
          await repo.update(db, tenantId, run.id, { status: run.prNumber ? 'opened' : costly ? 'refused' : 'failed', lastDeliveryRowId: deliveryRowId });
          if (await claim(`codehost:answer:${deliveryRowId}`)) {
            if (costly) {
              await db.transaction((tx) =>
                audit.record(tx, ctx, { action: AUDIT.refused, target: `codehost:${host.name}/${trigger.repo}#${trigger.target.number}`, sessionId, details: { reason: 'cost_limit', detail: err.message, deliveryRowId } }),
              );
            }
            await api.comment(ref, asked, answerText(costly ? 'cost_limit' : 'failed', { sessionUrl: sessionUrl(sessionId), detail: err.message }));
          }
          return;
        }
        await repo.update(db, tenantId, run.id, { headSha: cloned.sha, lastTurnId: turn.turnId, lastDeliveryRowId: deliveryRowId, status: 'running' });
        // Held on until that turn's end is pushed and answered (turnEndJob frees it).
        claimed = null;
        jlog.info({ runId: run.id, sessionId, turnId: turn.turnId }, 'code host run: turn queued');
      } catch (err) {
        // The last attempt: the host hears why rather than nothing (earlier ones are retried by the queue).
        if (lastTry(attempt)) await commentOnce(`codehost:answer:${deliveryRowId}`, api, ref, asked, answerText('failed', { sessionUrl: null, detail: failureText(err) })).catch(() => {});
        throw err;
      } finally {
        // Ended without handing a turn over (refused, failed, or retried by the queue): the run is free.
        if (claimed) await repo.release(db, tenantId, claimed, deliveryRowId).catch(() => {});
      }
    },

    /**
     * A turn ended or failed in some session (turn events): when the session is a code-host run's and the
     * turn is the one the run handed over, its end is queued (codehost-turn-end, once per turn).
     */
    async turnEnded(tenantId: string, sessionId: string, failedTurnId: string | null, eventId: string): Promise<void> {
      const run = await repo.bySession(db, tenantId, sessionId);
      if (!run?.lastTurnId) return;
      if (failedTurnId && failedTurnId !== run.lastTurnId) return;
      const payload: CodeHostTurnEndJob = { tenantId, runId: run.id, turnId: failedTurnId, eventId };
      await queue.send(CODE_HOST_TURN_END_JOB, payload, { ...JOB, singletonKey: `codehost:end:${run.lastTurnId}` }).catch((err) => {
        if (!(err instanceof JobAlreadyQueuedError)) throw err;
      });
    },

    /**
     * The end of a run's turn: the changes committed and pushed in the sandbox, the push checked against
     * the host, the pull request found or opened, the summary (files, cost) posted; or why not.
     */
    async turnEndJob(jobCtx: Ctx, data: CodeHostTurnEndJob, attempt?: JobInfo): Promise<void> {
      const run = await repo.byId(db, data.tenantId, data.runId);
      if (!run?.sessionId || !run.lastTurnId) return;
      const turnId = data.turnId ?? run.lastTurnId;
      if (turnId !== run.lastTurnId) return;
      // The run is the next delivery's once this end is answered (or given up): runJob's claim.
      const release = () => (run.lastDeliveryRowId ? repo.release(db, run.tenantId, run.id, run.lastDeliveryRowId).catch(() => {}) : Promise.resolve());
      const [host, user, turn, session] = await Promise.all([
        deps.hosts.findById(db, run.tenantId, run.hostId),
        deps.users.findById(db, run.tenantId, run.userId),
        repo.turnStart(db, run.tenantId, turnId),
        deps.sessionsRepo.byId(db, run.tenantId, run.sessionId),
      ]);
      if (!host || !user || !turn || !session) return;
      // turn.ended is the session's: the turn it ended may be an earlier one (a follow-up was queued behind it
      // meanwhile) and the run's turn still to come or running. Its end is recorded by another listener a
      // moment later: waited for briefly; a turn still not ended then queues this job again when it ends.
      let status = turn.status;
      for (let i = 0; !data.turnId && ['queued', 'sending', 'sent'].includes(status) && i < 40; i++) {
        await new Promise((res) => setTimeout(res, 250));
        status = (await repo.turnStart(db, run.tenantId, turnId))?.status ?? status;
      }
      if (!data.turnId && ['queued', 'sending', 'sent'].includes(status)) return;
      const { kind } = host;
      const conn = kind ? await apiFor(host, kind, user.id) : null;
      // Nothing can be said on the host (its kind unset since, no credential): the run is free all the same.
      if (!kind || !conn) return release();
      const { api } = conn;
      const ctx = await userCtx(run.tenantId, user.id, jobCtx.log);
      const ref = refOf(run);
      // Once the run has a pull request, the conversation is there (reviews, follow-ups): answered there.
      const where = run.prNumber !== null ? { type: 'pull_request' as const, number: run.prNumber } : targetOf(run);
      const url = sessionUrl(run.sessionId);
      let retried = false;
      const answer = async (k: AnswerKind, detail: string, costUsd?: number) => {
        await commentOnce(`codehost:end:${turnId}`, api, ref, where, answerText(k, { sessionUrl: url, detail, costUsd }));
      };
      try {
        if (status === 'failed' || status === 'lost' || data.turnId) {
          await repo.update(db, run.tenantId, run.id, { status: run.prNumber ? 'opened' : 'failed' });
          await answer(status === 'lost' ? 'lost' : 'failed', turn.error ?? 'the turn failed');
          return;
        }

        // The workspace snapshot after the turn names the changed files: waited for (it is taken in the background).
        let files: ChangedFile[] = [];
        const deadline = Date.now() + SNAPSHOT_WAIT_MS;
        for (;;) {
          const c = await deps.changes.list(ctx, { id: run.sessionId, messageId: turn.messageId }).catch(() => null);
          if (c && !c.pending) {
            files = c.files;
            break;
          }
          if (Date.now() > deadline) break;
          await new Promise((r) => setTimeout(r, 250));
        }
        const dir = cloneDirFor(host.name, run.repo, run.targetNumber);
        const costUsd = await repo.costSince(db, run.tenantId, run.sessionId, turn.createdAt);
        const title = session.title.replace(/^[^#]*#\d+:\s*/, '') || session.title;

        // The agent's own account of the turn (its answer), or the error it ended on.
        const o = await deps.outcome(session, turnId).catch(() => null);
        const ended = o?.done ? o : { error: null, text: '' };
        const agentSummary = ended.text;
        const client = await deps.runtimeClient({ tenantId: run.tenantId, userId: user.id });
        const finished = await finishInSandbox(client, {
          dir, url: cloneUrl(host, run.repo), branch: run.branch, since: run.headSha ?? '', message: `${title}\n\nAsked in ${run.repo}#${run.targetNumber}; made by ${user.handle}'s agent (session ${run.sessionId}).`,
          name: user.displayName || user.handle, email: user.email,
        }, () => deps.keepAwake?.(user.id));
        if (!finished.ok) {
          await repo.update(db, run.tenantId, run.id, { status: run.prNumber ? 'opened' : 'failed' });
          await answer('failed', `the push did not go through:\n${finished.detail}`, costUsd);
          return;
        }
        if (!finished.sha) {
          // Nothing changed because the turn itself failed (the provider refused, the turn was aborted): said so.
          if (ended.error) {
            await repo.update(db, run.tenantId, run.id, { status: run.prNumber ? 'opened' : 'failed' });
            await answer('failed', `the agent's turn ended with an error: ${ended.error}`, costUsd);
            return;
          }
          if (!run.prNumber) await repo.update(db, run.tenantId, run.id, { status: 'no_changes' });
          await answer('no_changes', '', costUsd);
          return;
        }
        // What the sandbox says it pushed is the agent's to fake (its git config could send the push
        // elsewhere): the branch's head as the host itself answers must be that commit.
        const onHost = await api.branchHead(ref, run.branch);
        if (onHost !== finished.sha) {
          await db.transaction(async (tx) => {
            await repo.update(tx, run.tenantId, run.id, { status: run.prNumber ? 'opened' : 'failed' });
            await audit.record(tx, ctx, { action: AUDIT.pullRequest, target: `codehost:${host.name}/${run.repo}#${run.targetNumber}`, sessionId: run.sessionId, details: { outcome: 'head_mismatch', branch: run.branch, pushed: finished.sha, onHost } });
          });
          await answer('failed', `the commit the sandbox reported (${finished.sha.slice(0, 12)}) is not the head of ${run.branch} on the host (${onHost ? onHost.slice(0, 12) : 'no such branch'}); no pull request was opened`, costUsd);
          return;
        }
        const existing = run.prNumber ? { number: run.prNumber, url: run.prUrl ?? '' } : await api.findPullRequest(ref, run.branch);
        const closes = run.targetType === 'issue' ? `Closes #${run.targetNumber}.\n\n` : '';
        const pr = existing ?? (await api.openPullRequest(ref, { head: run.branch, base: run.base, title, body: `${closes}Made by ${user.handle}'s agent: ${url}`, draft: false }));
        await db.transaction(async (tx) => {
          await repo.update(tx, run.tenantId, run.id, { prNumber: pr.number, prUrl: pr.url, headSha: finished.sha, status: 'opened' });
          await audit.record(tx, ctx, {
            action: AUDIT.pullRequest, target: `codehost:${host.name}/${run.repo}#${pr.number}`, sessionId: run.sessionId,
            details: { repo: run.repo, number: pr.number, branch: run.branch, base: run.base, sha: finished.sha, as: conn.as, opened: !existing },
          });
        });
        const inClone = filesInClone(files, dir);
        await commentOnce(`codehost:end:${turnId}`, api, ref, where, summaryComment({ prUrl: pr.url, prNumber: pr.number, kind, branch: run.branch, files: inClone, costUsd, sessionUrl: url, updated: !!existing, summary: agentSummary }));
      } catch (err) {
        if (lastTry(attempt)) await answer('failed', failureText(err)).catch(() => {});
        else retried = true;
        throw err;
      } finally {
        if (!retried) await release();
      }
    },

    /** A reply queued by the intake (a refusal) or a run: posted once (its key claimed in the ledger). */
    async replyJob(_ctx: Ctx, data: CodeHostReplyJob): Promise<void> {
      const host = await deps.hosts.findById(db, data.tenantId, data.hostId);
      if (!host?.kind) return;
      const conn = await apiFor(host, host.kind, null);
      if (!conn) return;
      await commentOnce(`codehost:reply:${data.key}`, conn.api, { repo: data.repo, projectId: data.projectId }, data.target, data.text);
    },
  };
}
