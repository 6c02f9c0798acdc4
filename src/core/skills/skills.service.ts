import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Database, Tx } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import { isUuid } from '../../lib/ids.js';
import type { AuditService } from '../audit/audit.service.js';
import { hasPermission, requirePermission, tenantOf } from '../authz.js';
import type { Ctx } from '../context.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import type { EmbeddingsService } from '../embeddings/embeddings.service.js';
import { JobAlreadyQueuedError, type JobQueue } from '../jobs/job-queue.js';
import type { ChatClient } from '../llm-gateway/chat-client.js';
import { modelPrice } from '../llm-gateway/provider-endpoint.js';
import { callCost } from '../llm-gateway/usage-tap.js';
import type { Logger } from '../logger.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import type { RuntimeRepo } from '../runtime/runtime.repo.js';
import type { RuntimeService } from '../runtime/runtime.service.js';
import type { SessionsRepo } from '../sessions/sessions.repo.js';
import type { UsageService } from '../usage/usage.service.js';
import {
  canMove,
  isRedo,
  jaccard,
  lexicalSignature,
  MIN_CLUSTER,
  MIN_SESSIONS,
  parseSkillMd,
  renderSkillMd,
  SKILL_STATUSES,
  skillProblems,
  TASK_COSINE,
  TASK_JACCARD,
  TOOL_GRAM_JACCARD,
  type SkillStatus,
} from './skill-fns.js';
import { SKILL_WRITER_SYSTEM, skillRequest, skillRetry } from './skill-prompts.js';
import type { SkillRow, SkillsRepo, TrajectoryOutcome } from './skills.repo.js';
import { readTurn } from './trajectory-fns.js';

/** After every finished turn: its trajectory is recorded, and similar successful work looked for. */
export const RECORD_TRAJECTORY_JOB = 'record-trajectory';
/** Similar successful trajectories found: the tenant's model writes one skill from them. */
export const PROPOSE_SKILL_JOB = 'propose-skill';
/** A turn asked again within this long (the same request) did not satisfy its person: not a success. */
export const REDO_WINDOW_MS = 10 * 60_000;
/** A session its person deletes within this long after a turn discards the turn (it was not worth keeping). */
export const DISCARD_WINDOW_MS = 30 * 60_000;
/** The generation of skill files before the current one stays this long (runtimes mid-turn still read it). */
const PREVIOUS_GENERATION_MS = 10 * 60_000;
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

export function publicSkill(s: SkillRow) {
  return { id: s.id, name: s.name, description: s.description, status: s.status, version: s.version, createdAt: s.createdAt };
}

/**
 * Learned skills: every finished turn is recorded as a trajectory (what was asked, the abstract tool
 * sequence, whether it went well); when at least MIN_CLUSTER successful trajectories of the tenant are
 * similar (task and tool sequence) and come from at least MIN_SESSIONS sessions, and no skill covers
 * them yet, the tenant's model writes one skill from them, which is checked and stored `proposed`.
 * Nothing reaches an agent until a person with admin.manage_templates promotes it: then it is written
 * into the tenant's read-only shared directory every sandbox of the tenant mounts, and the runtimes'
 * configuration allows that skill (and denies every other, so a skill in a cloned repository never loads).
 */
export function createSkillsService(deps: {
  db: Database;
  repo: SkillsRepo;
  sessionsRepo: Pick<SessionsRepo, 'byId' | 'turnSpent'>;
  runtimeRepo: Pick<RuntimeRepo, 'findProvider'>;
  runtime: Pick<RuntimeService, 'resolveModel' | 'refreshIdle'>;
  pool: Pick<RuntimePool, 'runningClient'>;
  embeddings: Pick<EmbeddingsService, 'embedQuery'>;
  chat: ChatClient;
  usage: Pick<UsageService, 'record'>;
  audit: AuditService;
  queue: JobQueue;
  clock: Clock;
  log: Logger;
  /** The tenant's shared directory on the host (mounted read-only in every sandbox of the tenant). */
  tenantDir: (tenantId: string) => string;
}) {
  const { db, repo, clock, log } = deps;
  const system = (tenantId: string): Ctx => ({ tenantId, actor: { kind: 'system', name: 'skills' }, requestId: crypto.randomUUID(), log, channel: 'worker' });

  /** A skill of the caller's tenant; the operator (CLI) may name any tenant's skill by its id alone. */
  async function visibleSkill(ctx: Ctx, id: string): Promise<SkillRow> {
    if (!isUuid(id)) throw new NotFoundError('skill not found');
    const tenantId = ctx.actor.kind === 'system' && !ctx.tenantId ? await repo.tenantOfSkill(db, id) : tenantOf(ctx);
    const s = tenantId ? await repo.skill(db, tenantId, id) : null;
    if (!s) throw new NotFoundError('skill not found');
    return s;
  }

  /**
   * The promoted skills as files, in a directory named after what is promoted (a "generation"): a
   * runtime's configuration names the directory, so a promotion or deprecation changes the
   * configuration, which makes every runtime reload its skills at its next turn. Written when missing
   * (the first runtime configured after a promotion, or the promotion itself).
   */
  async function materialise(tenantId: string): Promise<{ dir: string | null; allow: string[]; deny: string[] }> {
    const { promoted, others } = await repo.forRuntimes(db, tenantId);
    if (!promoted.length) return { dir: null, allow: [], deny: others };
    const generation = createHash('sha256')
      .update(JSON.stringify(promoted.map((p) => [p.name, p.version])))
      .digest('hex')
      .slice(0, 12);
    const dir = join(skillsRoot(tenantId), generation);
    if (!existsSync(dir)) {
      // Written aside and renamed into place: a runtime scanning meanwhile sees all of it or none.
      const staging = `${dir}.${process.pid}.${Date.now()}`;
      for (const p of promoted) {
        await mkdir(join(staging, p.name), { recursive: true, mode: 0o755 });
        await writeFile(join(staging, p.name, 'SKILL.md'), p.content, { mode: 0o644 });
      }
      await rename(staging, dir).catch(async (err: NodeJS.ErrnoException) => {
        await rm(staging, { recursive: true, force: true });
        if (!existsSync(dir)) throw err; // another process wrote the same generation meanwhile
      });
    }
    return { dir, allow: promoted.map((p) => p.name), deny: others };
  }

  const skillsRoot = (tenantId: string) => join(deps.tenantDir(tenantId), 'skills');

  /**
   * After a move: generations other than `current` are removed, but the newest of them while it is
   * recent (a runtime in the middle of a turn has not reloaded yet and may list its files), and from
   * that one the skills no longer promoted are removed at once: a deprecated skill is gone from disk.
   */
  async function prune(tenantId: string, current: string | null, withdrawn: string[]): Promise<void> {
    const root = skillsRoot(tenantId);
    const entries = await readdir(root, { withFileTypes: true }).catch(() => []);
    const others = await Promise.all(
      entries.filter((e) => e.isDirectory() && join(root, e.name) !== current).map(async (e) => ({ path: join(root, e.name), at: (await stat(join(root, e.name))).mtimeMs })),
    );
    others.sort((a, b) => b.at - a.at);
    const keep = others[0] && clock.now().getTime() - others[0].at < PREVIOUS_GENERATION_MS && !basename(others[0].path).includes('.') ? others[0] : null;
    for (const o of others) {
      if (o === keep) for (const name of withdrawn) await rm(join(o.path, name), { recursive: true, force: true });
      // A staging directory is left alone while another process may still be writing it.
      else if (!basename(o.path).includes('.') || clock.now().getTime() - o.at > PREVIOUS_GENERATION_MS) await rm(o.path, { recursive: true, force: true });
    }
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
    // The most similar, with one from another session first when there is one (work seen in one session only is not a pattern).
    const other = similar.find(({ c }) => c.sessionId !== t.sessionId);
    const chosen = (other ? [other, ...similar.filter((x) => x !== other)] : similar).slice(0, SOURCES_MAX - 1);
    const cluster = [t.id, ...chosen.map(({ c }) => c.id)];
    const sessions = new Set([t.sessionId, ...chosen.map(({ c }) => c.sessionId)]);
    if (cluster.length < MIN_CLUSTER || sessions.size < MIN_SESSIONS) return { decision: 'none', cluster };
    const queued = await db.transaction(async (tx) => {
      await repo.lockTenant(tx, tenantId);
      const jobId = crypto.randomUUID();
      const claimed = await repo.claim(tx, tenantId, cluster, jobId);
      if (claimed.length < MIN_CLUSTER) throw new ClaimLost();
      await deps.queue.send(PROPOSE_SKILL_JOB, { tenantId, trajectoryIds: claimed, claim: jobId }, { tx, retryLimit: 3, retryDelay: 2, singletonKey: `propose:${jobId}` });
      return claimed;
    }).catch((err) => {
      if (err instanceof ClaimLost) return null;
      throw err;
    });
    return queued ? { decision: 'proposed', cluster: queued } : { decision: 'covered', cluster: [] };
  }

  /** Writes one skill with the tenant's model from its sources, asking again with the problems. */
  async function write(tenantId: string, sources: Array<{ id: string; request: string; tools: string[]; answer: string }>): Promise<{ name: string; description: string; content: string } | { problems: string[] }> {
    const model = await deps.runtime.resolveModel(tenantId, null);
    const [providerName, modelId] = [model.ref.slice(0, model.ref.indexOf('/')), model.ref.slice(model.ref.indexOf('/') + 1)];
    const provider = await deps.runtimeRepo.findProvider(db, tenantId, providerName);
    if (!provider) throw new ValidationError(`the default model's provider "${providerName}" is gone`);
    const labelled = sources.map((s, i) => ({ label: `T${i + 1}`, request: s.request, tools: s.tools, answer: s.answer }));
    const existing = (await repo.listSkills(db, tenantId)).filter((s) => s.status !== 'deprecated').map((s) => ({ name: s.name, description: s.description }));
    const messages: Array<{ role: 'user' | 'assistant'; content: string }> = [{ role: 'user', content: skillRequest(labelled, existing) }];
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
      problems = parsed.ok ? skillProblems(parsed.skill, { sources: labelled.map((l) => l.label) }) : parsed.errors;
      if (parsed.ok && !problems.length) return { name: parsed.skill.name, description: parsed.skill.description, content: renderSkillMd(parsed.skill) };
      messages.push({ role: 'assistant', content: answer.text }, { role: 'user', content: skillRetry(problems) });
    }
    return { problems };
  }

  return {
    /** GET /v1/skills: the tenant's skills, newest first (any user of the tenant). */
    async list(ctx: Ctx, input: { status?: string }) {
      const tenantId = tenantOf(ctx);
      if (input.status !== undefined && !(SKILL_STATUSES as readonly string[]).includes(input.status)) {
        throw new ValidationError(`status: one of ${SKILL_STATUSES.join(', ')}`, { details: { field: 'status' } });
      }
      return (await repo.listSkills(db, tenantId, input.status as SkillStatus | undefined)).map(publicSkill);
    },

    /**
     * One skill: its latest SKILL.md, its versions, how often agents loaded it since it was promoted,
     * and the trajectories it was learnt from (their requests and answers only for those who review
     * skills, admin.manage_templates: they are other people's work).
     */
    async get(ctx: Ctx, id: string) {
      const s = await visibleSkill(ctx, id);
      const versions = await repo.versions(db, s.tenantId, s.id);
      const latest = versions.at(-1)!;
      const reviewer = ctx.actor.kind === 'system' || (ctx.actor.kind === 'user' && hasPermission(ctx.actor.permissions, 'admin.manage_templates'));
      const sources = reviewer ? await repo.trajectories(db, s.tenantId, latest.sourceTrajectories) : [];
      return {
        skill: {
          ...publicSkill(s),
          updatedAt: s.updatedAt,
          promotedVersion: s.promotedVersion,
          promotedAt: s.promotedAt,
          deprecatedAt: s.deprecatedAt,
          content: latest.content,
          loads: await repo.loadsSince(db, s.tenantId, s.id, s.promotedAt),
          versions: versions.map((v) => ({ version: v.version, description: v.description, createdAt: v.createdAt, sourceTrajectories: v.sourceTrajectories })),
          sourceTrajectories: reviewer
            ? sources.map((t) => ({ id: t.id, sessionId: t.sessionId, userId: t.userId, request: t.request, answer: t.answer, tools: t.tools, outcome: t.outcome, costUsd: t.costUsd, createdAt: t.createdAt }))
            : latest.sourceTrajectories.map((tid): Partial<(typeof sources)[number]> & { id: string } => ({ id: tid })),
        },
      };
    },

    /** PATCH promote / deprecate (admin.manage_templates): the state table's moves, audited; the same move again changes nothing. */
    async move(ctx: Ctx, id: string, to: 'promoted' | 'deprecated') {
      if (ctx.actor.kind !== 'system') requirePermission(ctx, 'admin.manage_templates');
      const s = await visibleSkill(ctx, id);
      const { tenantId } = s;
      let changed = false;
      await db.transaction(async (tx) => {
        await repo.lockTenant(tx, tenantId);
        const current = await repo.skill(tx, tenantId, s.id, { lock: true });
        if (!current) throw new NotFoundError('skill not found');
        const move = canMove(current.status, to);
        if (move === 'refused') throw new ConflictError(`a ${current.status} skill cannot be ${to}`, { details: { status: current.status } });
        // Promoting a promoted skill whose newer version waits is a move too (the new version goes live).
        if (move === 'same') return;
        await repo.setStatus(tx, tenantId, current.id, to, clock.now());
        await deps.audit.record(tx, ctx, { tenantId, action: to === 'promoted' ? 'skill.promote' : 'skill.deprecate', target: `skill:${current.id}`, details: { name: current.name, version: current.version, from: current.status } });
        changed = true;
      });
      // The files agents load: written now, so the next turn of every runtime finds them.
      if (changed) {
        await materialise(tenantId)
          .then((m) => prune(tenantId, m.dir, m.deny))
          .catch((err) => log.error({ err: (err as Error).message, tenantId }, 'could not write the tenant\'s skills'));
        // Idle runtimes reload now, in the background: the person is not kept waiting for it.
        void deps.runtime.refreshIdle(tenantId).catch((err) => log.warn({ err: (err as Error).message, tenantId }, 'could not refresh the tenant\'s runtimes'));
      }
      return { skill: publicSkill((await repo.skill(db, tenantId, s.id))!), changed };
    },

    /** For the runtime's configuration: where the promoted skills are, which names load, which never do. */
    runtimeSkills: (tenantId: string) => materialise(tenantId),

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

    /** An agent loaded a skill (the runtime's `skill` tool): counted when it is a promoted skill of the tenant. */
    async skillLoaded(tx: Tx, load: { tenantId: string; sessionId: string; name: string; callId: string }): Promise<void> {
      await repo.recordLoad(tx, { ...load, at: clock.now() });
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
        const q = await deps.embeddings.embedQuery(s.tenantId, reading.request).catch((err) => {
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
        costUsd: await deps.sessionsRepo.turnSpent(db, s.tenantId, s.id),
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
     * The propose-skill job: the tenant's model writes one skill from the claimed trajectories; a valid
     * one is stored `proposed` (a new skill, or the next version of the skill of that name or of a very
     * close description), audited; one that stays invalid, or a model that cannot be reached, drops the
     * proposal with the reasons audited (the job does not fail: retrying would ask the model again for
     * the same sources).
     */
    async proposeJob(ctx: Ctx, data: ProposeData & { claim?: string }): Promise<{ skillId: string | null; version: number | null }> {
      if (!isUuid(data?.tenantId) || !Array.isArray(data.trajectoryIds)) throw new ValidationError('propose-skill: malformed job data');
      const { tenantId } = data;
      const trajectories = (await repo.trajectories(db, tenantId, data.trajectoryIds)).filter((t) => !t.skillId && (!data.claim || t.proposalJob === data.claim));
      if (trajectories.length < MIN_CLUSTER) return { skillId: null, version: null };
      const ids = trajectories.map((t) => t.id);
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
        if (same) {
          // The name stays the existing skill's: it is the directory agents load it from.
          const doc = parseSkillMd(written.content);
          const content = doc.ok && doc.skill.name !== same.name ? renderSkillMd({ ...doc.skill, name: same.name }) : written.content;
          version = await repo.addVersion(tx, { tenantId, skillId: same.id, description: written.description, content, sources: ids, at });
          skillId = same.id;
        } else {
          const created = await repo.insertSkill(tx, { tenantId, name: written.name, description: written.description, content: written.content, sources: ids, at });
          skillId = created.id;
          version = 1;
        }
        await repo.setSkill(tx, tenantId, ids, skillId);
        await deps.audit.record(tx, system(tenantId), { action: 'skill.propose', target: `skill:${skillId}`, details: { name: same?.name ?? written.name, version, trajectories: ids } });
        return { skillId, version };
      });
    },
  };
}

class ClaimLost extends Error {}

export type SkillsService = ReturnType<typeof createSkillsService>;
