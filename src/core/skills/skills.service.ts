import type { Tx } from '../../db/database.js';
import { isUuid } from '../../lib/ids.js';
import { hasPermission, requirePermission, tenantOf } from '../../kernel/authz.js';
import { actorString, type Ctx } from '../../kernel/context.js';
import { ConflictError, NotFoundError, ValidationError } from '../../kernel/errors.js';
import type { RuntimeService } from '../runtime/runtime.service.js';
import { canMove, SKILL_STATUSES, versionMove, type SkillStatus } from './skill-fns.js';
import type { SkillFiles } from './skill-files.js';
import { createSkillLearning, type SkillLearningDeps } from './skill-learning.js';
import type { SkillRow } from './skills.repo.js';

// Names the composition root imports from here; the jobs they name live in skill-learning.ts.
export { PROPOSE_SKILL_JOB, RECORD_TRAJECTORY_JOB } from './skill-learning.js';

/**
 * A skill as its caller may see it. Reviewers (admin.manage_templates, the operator) see the latest
 * version and the one waiting for review; everyone else sees what agents load, the promoted version,
 * and nothing of a version not promoted (its text is drawn from other people's work and nobody has
 * checked it yet).
 */
function publicSkill(s: SkillRow, view: 'reviewer' | 'member' = 'reviewer') {
  if (view === 'member') {
    return { id: s.id, name: s.name, description: s.promotedDescription ?? '', status: s.status, version: s.promotedVersion ?? 0, promotedVersion: s.promotedVersion, pendingVersion: null, createdAt: s.createdAt };
  }
  return { id: s.id, name: s.name, description: s.description, status: s.status, version: s.version, promotedVersion: s.promotedVersion, pendingVersion: s.pendingVersion, createdAt: s.createdAt };
}

/** Who reviews skills: the operator, and users with admin.manage_templates. */
const isReviewer = (ctx: Ctx) => ctx.actor.kind === 'system' || (ctx.actor.kind === 'user' && hasPermission(ctx.actor.permissions, 'admin.manage_templates'));
/** What a member may see of a skill: one agents load. */
const loaded = (s: SkillRow) => s.status === 'promoted' && s.promotedVersion !== null;

/**
 * Learned skills: every finished turn is recorded as a trajectory (what was asked, the abstract tool
 * sequence, whether it went well); when at least MIN_CLUSTER successful trajectories of the tenant are
 * similar (task and tool sequence) and come from at least MIN_SESSIONS sessions of at least
 * `skills.minUsers` people, and no skill covers them yet, the tenant's model writes one skill from them
 * (given what the people's texts share, not the texts), which is checked and stored for review.
 * Nothing reaches an agent, and no member reads it, until a person with admin.manage_templates promotes it: then it is written
 * into the tenant's read-only shared directory every sandbox of the tenant mounts, and the runtimes'
 * configuration allows that skill (and denies every other, so a skill in a cloned repository never loads).
 *
 * This is the API (list, read, review); learning is skill-learning.ts, the files agents load skill-files.ts.
 */
export function createSkillsService(
  deps: SkillLearningDeps & {
    runtime: Pick<RuntimeService, 'refreshIdle'>;
    /** The promoted skills on disk (made before the runtime, which configures runtimes with them). */
    files: SkillFiles;
  },
) {
  const { db, repo, clock } = deps;
  const learning = createSkillLearning(deps);
  const { materialise } = deps.files;
  /** After a promotion or deprecation: the files are written, then idle runtimes reload (in the background: nobody waits for it). */
  const republish = async (tenantId: string) => {
    await deps.files.republish(tenantId);
    void deps.runtime.refreshIdle(tenantId).catch((err) => deps.log.warn({ err: (err as Error).message, tenantId }, 'could not refresh the tenant\'s runtimes'));
  };

  /** A skill of the caller's tenant; the operator (CLI) may name any tenant's skill by its id alone. */
  async function visibleSkill(ctx: Ctx, id: string): Promise<SkillRow> {
    if (!isUuid(id)) throw new NotFoundError('skill not found');
    const tenantId = ctx.actor.kind === 'system' && !ctx.tenantId ? await repo.tenantOfSkill(db, id) : tenantOf(ctx);
    const s = tenantId ? await repo.skill(db, tenantId, id) : null;
    if (!s) throw new NotFoundError('skill not found');
    return s;
  }

  /** One reviewer's decision on one version, in the caller's transaction (the tenant locked); true when it changed something. */
  async function review(tx: Tx, ctx: Ctx, current: SkillRow, version: number, act: 'promote' | 'reject', options: { acknowledgeFlags?: boolean }): Promise<boolean> {
    const { tenantId } = current;
    const v = await repo.version(tx, tenantId, current.id, version);
    if (!v) throw new NotFoundError(`skill version ${version} not found`);
    const move = versionMove(current.status, v.status, act);
    if (move === 'same') return false;
    if (move === 'refused') {
      throw new ConflictError(`version ${version} is ${v.status}${current.status === 'deprecated' ? ' and the skill deprecated' : ''}: only a version waiting for review can be ${act === 'promote' ? 'promoted' : 'rejected'}`, {
        details: { status: current.status, versionStatus: v.status },
      });
    }
    const at = clock.now();
    const by = actorString(ctx.actor);
    if (act === 'promote') {
      if (v.flags.length && options.acknowledgeFlags !== true) {
        throw new ConflictError(`version ${version} has ${v.flags.length} flagged line(s) a reviewer must read before promoting it`, {
          code: 'flags_not_acknowledged',
          details: { field: 'acknowledgeFlags', flags: v.flags.length },
          hint: 'Read them (GET /v1/skills/<id>, `aws skill show <id>`), then promote with { "acknowledgeFlags": true } (`aws skill promote <id> --accept-flags`).',
        });
      }
      await repo.promoteVersion(tx, { tenantId, skillId: current.id, version, by, at });
      await deps.audit.record(tx, ctx, {
        tenantId,
        action: 'skill.promote',
        target: `skill:${current.id}`,
        details: { name: current.name, version, from: current.status, replaced: current.promotedVersion, flags: v.flags.length, acknowledgedFlags: v.flags.length > 0 },
      });
      return true;
    }
    await repo.rejectVersion(tx, { tenantId, skillId: current.id, version, by, at });
    // A proposal never promoted, its last draft rejected: the skill is deprecated (nothing of it is left to review or load).
    const left = current.status === 'proposed' && (await repo.versions(tx, tenantId, current.id)).every((x) => x.version === version || x.status !== 'proposed');
    if (left) await repo.deprecate(tx, { tenantId, skillId: current.id, by, at });
    await deps.audit.record(tx, ctx, {
      tenantId,
      action: 'skill.reject',
      target: `skill:${current.id}`,
      details: { name: current.name, version, promotedVersion: current.promotedVersion, ...(left ? { deprecated: true } : {}) },
    });
    return true;
  }

  return {
    /**
     * GET /v1/skills: the tenant's skills, newest first. Reviewers see every skill; everyone else the
     * skills agents load, at their promoted version.
     */
    async list(ctx: Ctx, input: { status?: string }) {
      const tenantId = tenantOf(ctx);
      if (input.status !== undefined && !(SKILL_STATUSES as readonly string[]).includes(input.status)) {
        throw new ValidationError(`status: one of ${SKILL_STATUSES.join(', ')}`, { details: { field: 'status' } });
      }
      const rows = await repo.listSkills(db, tenantId, input.status as SkillStatus | undefined);
      return isReviewer(ctx) ? rows.map((s) => publicSkill(s)) : rows.filter(loaded).map((s) => publicSkill(s, 'member'));
    },

    /**
     * One skill. Reviewers (admin.manage_templates): every version with its SKILL.md, status and flagged
     * lines, `content`/`flags` of the version waiting for review (else the promoted one, else the latest),
     * and the trajectories it was learnt from with their requests and answers. Everyone else: a skill
     * agents load, as agents load it (its promoted version), source ids only; any other skill is 404 to
     * them (an unreviewed version is drawn from other people's work).
     */
    async get(ctx: Ctx, id: string) {
      const s = await visibleSkill(ctx, id);
      const versions = await repo.versions(db, s.tenantId, s.id);
      const loads = await repo.loadsSince(db, s.tenantId, s.id, s.promotedAt);
      const summary = (v: (typeof versions)[number]) => ({ version: v.version, status: v.status, description: v.description, createdAt: v.createdAt, sourceTrajectories: v.sourceTrajectories });
      if (!isReviewer(ctx)) {
        const live = loaded(s) ? versions.find((v) => v.version === s.promotedVersion) : undefined;
        if (!live) throw new NotFoundError('skill not found');
        return {
          skill: {
            ...publicSkill(s, 'member'),
            updatedAt: s.promotedAt ?? s.createdAt,
            promotedAt: s.promotedAt,
            deprecatedAt: null,
            contentVersion: live.version,
            content: live.content,
            flags: [],
            loads,
            versions: [summary(live)],
            sourceTrajectories: live.sourceTrajectories.map((tid) => ({ id: tid })),
          },
        };
      }
      const shown = versions.find((v) => v.version === s.pendingVersion) ?? versions.find((v) => v.version === s.promotedVersion) ?? versions.at(-1)!;
      const sources = await repo.trajectories(db, s.tenantId, shown.sourceTrajectories);
      return {
        skill: {
          ...publicSkill(s),
          updatedAt: s.updatedAt,
          promotedAt: s.promotedAt,
          deprecatedAt: s.deprecatedAt,
          contentVersion: shown.version,
          content: shown.content,
          flags: shown.flags,
          loads,
          versions: versions.map((v) => ({ ...summary(v), content: v.content, flags: v.flags, reviewedBy: v.reviewedBy, reviewedAt: v.reviewedAt })),
          sourceTrajectories: sources.map((t) => ({
            id: t.id,
            sessionId: t.sessionId,
            userId: t.userId,
            request: t.request,
            answer: t.answer,
            tools: t.tools,
            outcome: t.outcome,
            costUsd: t.costUsd,
            createdAt: t.createdAt,
          })),
        },
      };
    },

    /**
     * PATCH promote / deprecate (admin.manage_templates), SPEC.md's moves of the skill: promote puts the
     * version waiting for review live (a flagged one only with `acknowledgeFlags`); deprecate takes the
     * skill from every agent (a version waiting is rejected with it). Audited; the same move again
     * changes nothing.
     */
    async move(ctx: Ctx, id: string, to: 'promoted' | 'deprecated', options: { acknowledgeFlags?: boolean } = {}) {
      if (ctx.actor.kind !== 'system') requirePermission(ctx, 'admin.manage_templates');
      const s = await visibleSkill(ctx, id);
      const { tenantId } = s;
      let changed = false;
      let version: number | null = null;
      await db.transaction(async (tx) => {
        await repo.lockTenant(tx, tenantId);
        const current = await repo.skill(tx, tenantId, s.id, { lock: true });
        if (!current) throw new NotFoundError('skill not found');
        if (to === 'promoted') {
          if (current.status === 'deprecated') throw new ConflictError('a deprecated skill cannot be promoted', { details: { status: current.status } });
          // Nothing waits: promoted already (or, never otherwise, nothing to promote).
          if (current.pendingVersion === null) {
            if (current.status === 'promoted') return;
            throw new ConflictError('no version of this skill waits for review', { details: { status: current.status } });
          }
          version = current.pendingVersion;
          changed = await review(tx, ctx, current, version, 'promote', options);
          return;
        }
        const move = canMove(current.status, to);
        if (move === 'refused') throw new ConflictError(`a ${current.status} skill cannot be ${to}`, { details: { status: current.status } });
        if (move === 'same') return;
        await repo.deprecate(tx, { tenantId, skillId: current.id, by: actorString(ctx.actor), at: clock.now() });
        await deps.audit.record(tx, ctx, {
          tenantId,
          action: 'skill.deprecate',
          target: `skill:${current.id}`,
          details: { name: current.name, from: current.status, promotedVersion: current.promotedVersion, rejectedVersion: current.pendingVersion },
        });
        changed = true;
      });
      if (changed) await republish(tenantId);
      return { skill: publicSkill((await repo.skill(db, tenantId, s.id))!), changed, version };
    },

    /**
     * PATCH /v1/skills/:id/versions/:version/promote|reject (admin.manage_templates): a reviewer's
     * decision on one version waiting for review. Promoting puts it live in place of the promoted one (a
     * version with flagged lines only with `acknowledgeFlags`: the reviewer has read them); rejecting it
     * leaves the promoted version where it is (a skill never promoted, left with nothing to review, is
     * deprecated: SPEC.md's proposed -> deprecated). Audited; the same decision again changes nothing.
     */
    async reviewVersion(ctx: Ctx, id: string, version: number, act: 'promote' | 'reject', options: { acknowledgeFlags?: boolean } = {}) {
      if (ctx.actor.kind !== 'system') requirePermission(ctx, 'admin.manage_templates');
      if (!Number.isInteger(version) || version < 1) throw new ValidationError('version: a positive integer', { details: { field: 'version' } });
      const s = await visibleSkill(ctx, id);
      const { tenantId } = s;
      let changed = false;
      await db.transaction(async (tx) => {
        await repo.lockTenant(tx, tenantId);
        const current = await repo.skill(tx, tenantId, s.id, { lock: true });
        if (!current) throw new NotFoundError('skill not found');
        changed = await review(tx, ctx, current, version, act, options);
      });
      if (changed && act === 'promote') await republish(tenantId);
      return { skill: publicSkill((await repo.skill(db, tenantId, s.id))!), changed, version };
    },

    /** For the runtime's configuration: where the promoted skills are, which names load, which never do. */
    runtimeSkills: (tenantId: string) => materialise(tenantId),

    /** An agent loaded a skill (the runtime's `skill` tool): counted when it is a promoted skill of the tenant. */
    async skillLoaded(tx: Tx, load: { tenantId: string; sessionId: string; name: string; callId: string }): Promise<void> {
      await repo.recordLoad(tx, { ...load, at: clock.now() });
    },

    /** A turn ended: its trajectory is recorded by a job (not plans' sessions). */
    turnEnded: learning.turnEnded,
    /** The session was deleted: its recent turns do not count as successes. */
    sessionDeleted: learning.sessionDeleted,
    /** The record-trajectory job. */
    recordJob: learning.recordJob,
    detect: learning.detect,
    /** The propose-skill job. */
    proposeJob: learning.proposeJob,
  };
}
