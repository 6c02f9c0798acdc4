/**
 * The shared contract of code hosts handing work to agents: what the webhook intake passes to the run,
 * the job names and payloads, the audit actions. Written once, before the three parts; changed only by
 * agreement of all three (it is the seam between codehost-intake, codehost-runs and the admin screen).
 */

// Typed with the git hosts, whose `kind` it is (the git hosts' repo does not import the code hosts).
import type { CodeHostKind } from '../connectors/git-hosts.repo.js';
export type { CodeHostKind };
export const CODE_HOST_KINDS: readonly CodeHostKind[] = ['github', 'gitlab', 'gitea'];

/** What a delivery asked for, normalised from any of the three hosts (codehost-webhook-fns.ts parseDelivery). */
export interface CodeHostTrigger {
  kind: CodeHostKind;
  /** The host's delivery id (X-GitHub-Delivery, GitLab Idempotency-Key / X-Gitlab-Event-UUID, X-Gitea-Delivery). */
  deliveryId: string;
  /** `<owner>/<repo>` as the git gateway names it (GitLab: the full path with groups), no `.git`. */
  repo: string;
  /** GitLab's numeric project id (its REST paths want it); null on GitHub and Gitea. */
  projectId: number | null;
  /** Where the work was asked for: an issue, or a pull/merge request (GitLab `iid`, not `id`). */
  target: { type: 'issue' | 'pull_request'; number: number; title: string; body: string; url: string };
  /** comment: a comment starting with the host's mention; label: the host's trigger label added. */
  via: 'comment' | 'label';
  /** The triggering comment (via comment); null for a label. Its text with the mention stripped. */
  comment: { id: string; body: string; url: string } | null;
  /** Who wrote the comment or added the label, as the host names them. */
  actor: { login: string; id: string; email: string | null };
  /** The repository's default branch, from the payload. */
  defaultBranch: string;
  /** A pull request's head (same repository only; forks are refused at intake): branch and sha. */
  head: { ref: string; sha: string } | null;
  /** Whether the head branch's repository is another (a fork): intake refuses those. */
  fromFork: boolean;
}

/** The tenant's person the actor mapped to, and how (codehost-intake.service.ts). */
export interface CodeHostPerson {
  userId: string;
  handle: string;
  mappedBy: 'connection' | 'email';
}

/** Queued by the intake in the delivery's transaction; handled by codehost-runs.service.ts runJob. */
export const CODE_HOST_RUN_JOB = 'codehost-run';
export interface CodeHostRunJob {
  tenantId: string;
  hostId: string;
  /** code_host_deliveries.id (uuid): also the job's singletonKey `codehost:<id>`. */
  deliveryRowId: string;
  person: CodeHostPerson;
  trigger: CodeHostTrigger;
}

/** Queued by the intake for a refusal (and by the runs for their answers); handled by codehost-runs.service.ts replyJob. */
export const CODE_HOST_REPLY_JOB = 'codehost-reply';
export interface CodeHostReplyJob {
  tenantId: string;
  hostId: string;
  repo: string;
  projectId: number | null;
  target: { type: 'issue' | 'pull_request'; number: number };
  text: string;
  /** Exactly-once across retries and serves: the job's singletonKey and a claimLedgerKey. */
  key: string;
}

/** Daily purge of deliveries older than DELIVERY_KEEP_DAYS (scheduled: schedules[CODE_HOST_SWEEP_JOB]). */
export const CODE_HOST_SWEEP_JOB = 'codehost-sweep';
export const CODE_HOST_SWEEP_CRON = '17 3 * * *';
/** Delivery ids are kept (replays refused) at least this long; the admin's log shows the same rows. */
export const DELIVERY_KEEP_DAYS = 2;

/** Outcomes of a delivery as the admin's log shows them (code_host_deliveries.outcome). */
export type DeliveryOutcome =
  | 'queued' // a run was queued
  | 'ignored' // not an event we act on (unknown event, no mention, other label, ping)
  | 'refused' // a trigger we answered with a refusal (reason says which)
  | 'replayed' // a delivery id seen already (never stored twice: counted on the first row)
  | 'test'; // the admin's test delivery (verified end to end, nothing run)

export type RefusalReason = 'unmapped' | 'no_permission' | 'not_allowed_repo' | 'rate_limited' | 'fork' | 'cost_limit' | 'deactivated';

export const AUDIT = {
  trigger: 'codehost.trigger',
  refused: 'codehost.refused',
  pullRequest: 'codehost.pull_request',
  /** Admin side (C): secret generated/rotated, settings changed, test delivery sent. */
  webhookSecret: 'codehost.webhook_secret',
  webhookUpdate: 'codehost.webhook_update',
  webhookTest: 'codehost.webhook_test',
} as const;

/** The public webhook path; :hookId is git_hosts.webhook_id (random, not the tenant's or host's name). */
export const WEBHOOK_PATH = '/v1/codehost/webhooks/:hookId';
/** Bodies larger than this are answered 413 before anything else is read. */
export const WEBHOOK_MAX_BYTES = 1024 * 1024;

/** The host's REST calls used here (codehost-api.ts, B); A and C use only this interface. */
export interface CodeHostApi {
  getIssue(repo: RepoRef, number: number): Promise<{ title: string; body: string; url: string; state: string }>;
  comment(repo: RepoRef, target: { type: 'issue' | 'pull_request'; number: number }, body: string): Promise<{ id: string; url: string }>;
  /** 'eyes' on a comment (GitHub/Gitea reactions; GitLab award emoji `eyes`); on the issue itself when commentId is null. */
  react(repo: RepoRef, target: { type: 'issue' | 'pull_request'; number: number }, commentId: string | null, reaction: 'eyes' | 'rocket'): Promise<void>;
  openPullRequest(repo: RepoRef, pr: { head: string; base: string; title: string; body: string; draft: boolean }): Promise<{ number: number; url: string }>;
  /** The open pull request of a head branch, if any (a follow-up pushes to it instead of opening another). */
  findPullRequest(repo: RepoRef, head: string): Promise<{ number: number; url: string } | null>;
  branchHead(repo: RepoRef, branch: string): Promise<string | null>;
  /**
   * A pull request's head as the host answers it, and whether it comes from another repository (a fork).
   * A comment on a pull request's conversation (GitHub's and Gitea's issue_comment) carries no head.
   */
  pullRequestHead(repo: RepoRef, number: number): Promise<{ head: { ref: string; sha: string }; fromFork: boolean }>;
}
export interface RepoRef {
  repo: string;
  projectId: number | null;
}
