import type { Database, Tx } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import { isUuid } from '../../lib/ids.js';
import type { AuditService } from '../audit/audit.service.js';
import type { Ctx } from '../../kernel/context.js';
import { ValidationError } from '../../kernel/errors.js';
import type { EmbeddingsService } from '../embeddings/embeddings.service.js';
import { JobAlreadyQueuedError, type JobQueue } from '../jobs/job-queue.js';
import type { ChatClient } from '../llm-gateway/chat-client.js';
import { modelPrice } from '../llm-gateway/provider-endpoint.js';
import { callCost } from '../llm-gateway/model-call-fns.js';
import type { Logger } from '../../kernel/logger.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import type { ProvidersRepo } from '../providers/providers.repo.js';
import type { RuntimeService } from '../runtime/runtime.service.js';
import type { SessionsRepo } from '../sessions/sessions.repo.js';
import type { TurnsRepo } from '../sessions/turns.repo.js';
import type { TenantsRepo } from '../tenants/tenants.repo.js';
import { MIN_USERS_MAX } from '../tenants/tenant-settings-fns.js';
import type { UsageService } from '../usage/usage.service.js';
import {
  isRedo,
  jaccard,
  lexicalSignature,
  MIN_CLUSTER,
  MIN_SESSIONS,
  MIN_USERS_DEFAULT,
  parseSkillMd,
  renderSkillMd,
  skillFlags,
  skillProblems,
  TASK_COSINE,
  TASK_JACCARD,
  TOOL_GRAM_JACCARD,
  type SkillFlag,
} from './skill-fns.js';
import { SKILL_WRITER_SYSTEM, skillRequest, skillRetry } from './skill-prompts.js';
import { abstractSources, copiedSources, type SkillSource } from './skill-sources.js';
import type { SkillsRepo, TrajectoryOutcome, TrajectoryRow } from './skills.repo.js';
import { readTurn } from './trajectory-fns.js';

/** After every finished turn: its trajectory is recorded, and similar successful work looked for. */
export const RECORD_TRAJECTORY_JOB = 'record-trajectory';
/** Similar successful trajectories found: the tenant's model writes one skill from them. */
export const PROPOSE_SKILL_JOB = 'propose-skill';
/** A turn asked again within this long (the same request) did not satisfy its person: not a success. */
const REDO_WINDOW_MS = 10 * 60_000;
/** A session its person deletes within this long after a turn discards the turn (it was not worth keeping). */
const DISCARD_WINDOW_MS = 30 * 60_000;
/** Candidates a new trajectory is compared with (the newest sharing a tool 3-gram). */
const CANDIDATES = 500;
/** Trajectories given to the model for one skill (the new one and the most similar others). */
const SOURCES_MAX = 5;
/** The skill writer is asked again with the problems at most this many times. */
const WRITER_RETRIES = 2;
/** A new proposal whose description is this close to an existing skill's becomes its next version. */
const SAME_SKILL_JACCARD = 0.7;

export interface RecordData {
  tenantId: string;
  sessionId: string;
}

export interface ProposeData {
  tenantId: string;
  trajectoryIds: string[];
}

export interface SkillLearningDeps {
  db: Database;
  repo: SkillsRepo;
  sessionsRepo: Pick<SessionsRepo, 'byId'>;
  turnsRepo: Pick<TurnsRepo, 'turnSpent'>;
  /** Tenant settings: `skills.minUsers`, `skills.allowedHosts`, `egress.allow`. */
  tenantsRepo: Pick<TenantsRepo, 'findById'>;
  providers: Pick<ProvidersRepo, 'find'>;
  runtime: Pick<RuntimeService, 'resolveModel'>;
  pool: Pick<RuntimePool, 'runningClient'>;
  embeddings: Pick<EmbeddingsService, 'embedQuery'>;
  chat: ChatClient;
  usage: Pick<UsageService, 'record'>;
  audit: AuditService;
  queue: JobQueue;
  clock: Clock;
  log: Logger;
}

/**
 * How skills are learnt: every finished turn recorded as a trajectory (its jobs), similar successful
 * work of several people looked for, and one skill written from it by the tenant's model and stored
 * for review. What reviewers do with it is skills.service.ts.
 */
export function createSkillLearning(deps: SkillLearningDeps) {
  const { db, repo, clock, log } = deps;
  const system = (tenantId: string): Ctx => ({ tenantId, actor: { kind: 'system', name: 'skills' }, requestId: crypto.randomUUID(), log, channel: 'worker' });

  /**
   * The tenant's rules for learnt skills (tenant settings): the different people whose work a proposal
   * needs (`skills.minUsers`), and the hosts a skill may name unflagged (`skills.allowedHosts`, and the
   * agents' own `egress.allow`).
   */
  async function settingsOf(tenantId: string): Promise<{ minUsers: number; allowedHosts: string[] }> {
    const t = await deps.tenantsRepo.findById(db, tenantId);
    const st = (t?.settings ?? {}) as { skills?: { minUsers?: unknown; allowedHosts?: unknown }; egress?: { allow?: unknown } };
    const list = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
    const min = st.skills?.minUsers;
    return {
      minUsers: typeof min === 'number' && Number.isInteger(min) ? Math.min(MIN_USERS_MAX, Math.max(1, min)) : MIN_USERS_DEFAULT,
      allowedHosts: [...list(st.skills?.allowedHosts), ...list(st.egress?.allow)],
    };
  }

  /** Similar successful work around a new trajectory; queues a proposal when there is enough and nothing covers it. */
  async function detect(tenantId: string, trajectoryId: string): Promise<{ decision: 'none' | 'covered' | 'proposed'; cluster: string[] }> {
    const t = await repo.trajectory(db, tenantId, trajectoryId);
    if (!t || t.outcome !== 'success' || t.skillId || t.proposalJob || !t.toolGrams.length) return { decision: 'none', cluster: [] };
    const vector = t.embedding && t.embeddingModel ? { modelKey: t.embeddingModel, values: JSON.parse(t.embedding) as number[] } : null;
    const candidates = await repo.candidates(db, tenantId, t.id, t.toolGrams, vector, CANDIDATES);
    const similar = candidates
      .map((c) => ({ c, tools: jaccard(t.toolGrams, c.toolGrams) }))
      .filter(({ c, tools }) => tools >= TOOL_GRAM_JACCARD && (c.distance !== null ? 1 - c.distance >= TASK_COSINE : jaccard(t.words, c.words) >= TASK_JACCARD))
      .sort((a, b) => b.tools - a.tools);
    // Already covered by a skill (or by a proposal under way): this one joins it, nothing new is written.
    const covering = similar.find(({ c }) => c.skillId)?.c.skillId ?? null;
    if (covering) {
      await repo.setSkill(db, tenantId, [t.id], covering);
      return { decision: 'covered', cluster: [] };
    }
    if (similar.some(({ c }) => c.proposalJob)) return { decision: 'covered', cluster: [] };
    // The most similar, other people's work first (one of each person), then other sessions': work seen
    // from one person, or in one session, is not a pattern of the organisation.
    const people = new Set([t.userId]);
    const seen = new Set([t.sessionId]);
    const [persons, sessionsFirst, rest]: Array<typeof similar> = [[], [], []];
    for (const x of similar) {
      if (!people.has(x.c.userId)) persons.push(x);
      else if (!seen.has(x.c.sessionId)) sessionsFirst.push(x);
      else rest.push(x);
      people.add(x.c.userId);
      seen.add(x.c.sessionId);
    }
    const chosen = [...persons, ...sessionsFirst, ...rest].slice(0, SOURCES_MAX - 1);
    const cluster = [t.id, ...chosen.map(({ c }) => c.id)];
    const userOf = new Map([[t.id, t.userId], ...chosen.map(({ c }) => [c.id, c.userId] as [string, string])]);
    const sessions = new Set([t.sessionId, ...chosen.map(({ c }) => c.sessionId)]);
    const { minUsers } = await settingsOf(tenantId);
    const usersOf = (ids: string[]) => new Set(ids.map((id) => userOf.get(id))).size;
    if (cluster.length < MIN_CLUSTER || sessions.size < MIN_SESSIONS || usersOf(cluster) < minUsers) return { decision: 'none', cluster };
    const queued = await db.transaction(async (tx) => {
      await repo.lockTenant(tx, tenantId);
      const jobId = crypto.randomUUID();
      const claimed = await repo.claim(tx, tenantId, cluster, jobId);
      if (claimed.length < MIN_CLUSTER || usersOf(claimed) < minUsers) throw new ClaimLost();
      await deps.queue.send(PROPOSE_SKILL_JOB, { tenantId, trajectoryIds: claimed, claim: jobId }, { tx, retryLimit: 3, retryDelay: 2, singletonKey: `propose:${jobId}` });
      return claimed;
    }).catch((err) => {
      if (err instanceof ClaimLost) return null;
      throw err;
    });
    return queued ? { decision: 'proposed', cluster: queued } : { decision: 'covered', cluster: [] };
  }

  /**
   * Writes one skill with the tenant's model from its sources, asking again with the problems. The model
   * is given the sources abstracted (what different people's requests and answers share, values as
   * placeholders), never a raw request or answer; a draft that copies one is refused all the same.
   */
  async function write(tenantId: string, sources: TrajectoryRow[]): Promise<{ name: string; description: string; content: string } | { problems: string[] }> {
    const model = await deps.runtime.resolveModel(tenantId, null);
    const [providerName, modelId] = [model.ref.slice(0, model.ref.indexOf('/')), model.ref.slice(model.ref.indexOf('/') + 1)];
    const provider = await deps.providers.find(db, tenantId, providerName);
    if (!provider) throw new ValidationError(`the default model's provider "${providerName}" is gone`);
    const labelled: SkillSource[] = sources.map((s, i) => ({ label: `T${i + 1}`, userId: s.userId, request: s.request, tools: s.tools, answer: s.answer }));
    const existing = (await repo.listSkills(db, tenantId)).filter((s) => s.status !== 'deprecated').map((s) => ({ name: s.name, description: s.description }));
    const messages: Array<{ role: 'user' | 'assistant'; content: string }> = [{ role: 'user', content: skillRequest(abstractSources(labelled), existing) }];
    // A skill is at most ~5k tokens; never more than the model may answer (providers refuse a larger max).
    const maxTokens = Math.min(6000, provider.models.find((m) => m.id === modelId)?.outputLimit ?? 6000);
    let problems: string[] = [];
    for (let attempt = 0; attempt <= WRITER_RETRIES; attempt++) {
      const answer = await deps.chat.complete(provider, modelId, { system: SKILL_WRITER_SYSTEM, messages, maxTokens, timeoutMs: 120_000, temperature: 0.2 });
      const tokens = { input: answer.usage.input, output: answer.usage.output, reasoning: 0, cacheRead: 0, cacheWrite: 0 };
      await deps.usage.record(db, {
        tenantId,
        userId: null,
        sessionId: null,
        model: modelId,
        provider: provider.name,
        tokens,
        costUsd: callCost(tokens, modelPrice(provider, modelId)),
        channel: 'skills',
      });
      const parsed = parseSkillMd(answer.text);
      problems = parsed.ok
        ? [
            ...skillProblems(parsed.skill, { sources: labelled.map((l) => l.label) }),
            ...copiedSources(renderSkillMd(parsed.skill), labelled).map((what) => `it repeats ${what} word for word: write general steps from what the records share, never one person's words`),
          ]
        : parsed.errors;
      if (parsed.ok && !problems.length) return { name: parsed.skill.name, description: parsed.skill.description, content: renderSkillMd(parsed.skill) };
      messages.push({ role: 'assistant', content: answer.text }, { role: 'user', content: skillRetry(problems) });
    }
    return { problems };
  }

  return {
    /** A turn ended (the session stream heard it): its trajectory is recorded by a job. Plans' sessions are not recorded. */
    async turnEnded(s: { id: string; tenantId: string; planId: string | null }, eventId: string): Promise<void> {
      if (s.planId) return;
      await deps.queue
        .send(RECORD_TRAJECTORY_JOB, { tenantId: s.tenantId, sessionId: s.id } satisfies RecordData, { singletonKey: `trajectory:${s.id}:${eventId}`, retryLimit: 3 })
        .catch((err: Error) => {
          // The same turn end heard twice: its job is queued already.
          if (!(err instanceof JobAlreadyQueuedError)) throw err;
        });
    },

    /** The session was deleted: its recent turns were not worth keeping, so they do not count as successes. */
    async sessionDeleted(tx: Tx, tenantId: string, sessionId: string): Promise<void> {
      await repo.discardSince(tx, tenantId, sessionId, new Date(clock.now().getTime() - DISCARD_WINDOW_MS));
    },

    /**
     * The record-trajectory job: reads the session's last turn from its runtime, records it (once) with
     * its outcome, demotes the turn before it when this one asks for the same thing again, and looks
     * for similar successful work.
     */
    async recordJob(ctx: Ctx, data: RecordData): Promise<{ trajectoryId: string | null; decision: string }> {
      if (!isUuid(data?.tenantId) || !isUuid(data?.sessionId)) throw new ValidationError('record-trajectory: malformed job data');
      const s = await deps.sessionsRepo.byId(db, data.tenantId, data.sessionId);
      if (!s || s.planId || !s.upstreamId) return { trajectoryId: null, decision: 'none' };
      const turn = await repo.latestTurn(db, s.tenantId, s.id);
      if (!turn || turn.orchestrated) return { trajectoryId: null, decision: 'none' };
      const client = await deps.pool.runningClient({ tenantId: s.tenantId, userId: s.ownerId });
      if (!client) return { trajectoryId: null, decision: 'none' };
      const reading = readTurn(await client.messages(s.upstreamId), turn.messageId, s.directory);
      if (!reading || !reading.finished || !reading.request) return { trajectoryId: null, decision: 'none' };
      const outcome: TrajectoryOutcome = reading.error ? 'error' : reading.rejected || (await repo.refusedSince(db, s.tenantId, s.id, turn.createdAt)) ? 'rejected' : 'success';
      let embedding: { modelKey: string; values: number[] } | null = null;
      if (outcome === 'success') {
        // Charged to the person whose request it is, like the turn itself.
        const q = await deps.embeddings.embedQuery(s.tenantId, reading.request, { userId: s.ownerId }).catch((err) => {
          ctx.log.warn({ err: (err as Error).message }, 'embedding a trajectory failed: it is compared by its words');
          return null;
        });
        if (q) embedding = { modelKey: q.modelKey, values: q.vector };
      }
      const at = clock.now();
      const id = await repo.insertTrajectory(db, {
        tenantId: s.tenantId,
        userId: s.ownerId,
        sessionId: s.id,
        messageId: turn.messageId,
        request: reading.request,
        answer: reading.answer,
        tools: reading.tools,
        toolGrams: reading.toolGrams,
        words: reading.words,
        embedding,
        outcome,
        costUsd: await deps.turnsRepo.turnSpent(db, s.tenantId, s.id),
        createdAt: at,
      });
      if (!id) return { trajectoryId: null, decision: 'none' };
      const previous = await repo.previousInSession(db, s.tenantId, s.id, at);
      if (previous?.outcome === 'success' && at.getTime() - new Date(previous.createdAt).getTime() <= REDO_WINDOW_MS && isRedo(previous.request, reading.request)) {
        await repo.setOutcome(db, s.tenantId, previous.id, 'redone');
      }
      const { decision } = outcome === 'success' ? await detect(s.tenantId, id) : { decision: 'none' };
      return { trajectoryId: id, decision };
    },

    detect,

    /**
     * The propose-skill job: the tenant's model writes one skill from the claimed trajectories (at least
     * `skills.minUsers` people's); a valid one is stored for review with its flagged lines (a new skill,
     * or the next version of the skill of that name or of a very close description, waiting beside the
     * promoted one), audited; one that stays invalid, or a model that cannot be reached, drops the
     * proposal with the reasons audited (the job does not fail: retrying would ask the model again for
     * the same sources).
     */
    async proposeJob(ctx: Ctx, data: ProposeData & { claim?: string }): Promise<{ skillId: string | null; version: number | null }> {
      if (!isUuid(data?.tenantId) || !Array.isArray(data.trajectoryIds)) throw new ValidationError('propose-skill: malformed job data');
      const { tenantId } = data;
      const trajectories = (await repo.trajectories(db, tenantId, data.trajectoryIds)).filter((t) => !t.skillId && (!data.claim || t.proposalJob === data.claim));
      if (trajectories.length < MIN_CLUSTER) return { skillId: null, version: null };
      const ids = trajectories.map((t) => t.id);
      const { minUsers, allowedHosts } = await settingsOf(tenantId);
      const users = new Set(trajectories.map((t) => t.userId)).size;
      if (users < minUsers) {
        // Queued under a lower setting (or a user deleted meanwhile): not enough people's work now.
        await repo.releaseClaim(db, tenantId, ids);
        return { skillId: null, version: null };
      }
      const written = await write(tenantId, trajectories).catch((err: Error) => ({ problems: [`the model could not be asked: ${err.message}`] }));
      if ('problems' in written) {
        // The claim is let go: the next similar success tries again, with new sources among them.
        await db.transaction(async (tx) => {
          await repo.releaseClaim(tx, tenantId, ids);
          await deps.audit.record(tx, system(tenantId), { action: 'skill.proposal_failed', target: `trajectories:${ids.length}`, details: { trajectories: ids, problems: written.problems.slice(0, 20) } });
        });
        ctx.log.warn({ tenantId, problems: written.problems }, 'the model wrote no usable skill');
        return { skillId: null, version: null };
      }
      return db.transaction(async (tx) => {
        await repo.lockTenant(tx, tenantId);
        const words = lexicalSignature(written.description);
        const same =
          (await repo.skillByName(tx, tenantId, written.name)) ??
          (await repo.listSkills(tx, tenantId)).find((s) => s.status !== 'deprecated' && jaccard(words, lexicalSignature(s.description)) >= SAME_SKILL_JACCARD) ??
          null;
        const at = clock.now();
        let skillId: string;
        let version: number;
        let flags: SkillFlag[];
        if (same) {
          // The name stays the existing skill's: it is the directory agents load it from.
          const doc = parseSkillMd(written.content);
          const content = doc.ok && doc.skill.name !== same.name ? renderSkillMd({ ...doc.skill, name: same.name }) : written.content;
          flags = skillFlags(content, { allowedHosts });
          version = await repo.addVersion(tx, { tenantId, skillId: same.id, description: written.description, content, sources: ids, flags, at });
          skillId = same.id;
        } else {
          flags = skillFlags(written.content, { allowedHosts });
          const created = await repo.insertSkill(tx, { tenantId, name: written.name, description: written.description, content: written.content, sources: ids, flags, at });
          skillId = created.id;
          version = 1;
        }
        await repo.setSkill(tx, tenantId, ids, skillId);
        await deps.audit.record(tx, system(tenantId), {
          action: 'skill.propose',
          target: `skill:${skillId}`,
          details: { name: same?.name ?? written.name, version, trajectories: ids, users, flags: flags.length, ...(same?.status === 'promoted' ? { beside: same.promotedVersion } : {}) },
        });
        return { skillId, version };
      });
    },
  };
}

class ClaimLost extends Error {}
