import type { Database } from '../../db/database.js';
import { hasPermission, requirePermission, requireTokenScope, requireUser } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { ForbiddenError, NotFoundError } from '../../kernel/errors.js';
import type { AuditService } from '../audit/audit.service.js';
import { effectiveModel, type ModelSource } from '../providers/model-choice-fns.js';
import type { RuntimeService } from '../runtime/runtime.service.js';
import type { SessionRow, SessionsRepo } from './sessions.repo.js';

/** A session's model as GET/PUT /v1/sessions/:id/model answer it. */
export interface SessionModel {
  sessionId: string;
  /** The model the person chose for the session, or null. */
  model: string | null;
  /** The session's template's model (its snapshot), or null. */
  templateModel: string | null;
  /** The tenant's applied default model, or null while none is applied. */
  defaultModel: string | null;
  /** What the session's next turn runs on without a model of its own, and why. */
  effective: { model: string; source: ModelSource } | null;
}

/**
 * The models a person may choose, and the model chosen for a session. The turn's model is
 * resolved and checked where turns are accepted and sent (sessions.service.ts prompt, turn-runner.ts).
 */
export function createSessionModels(deps: {
  db: Database;
  repo: Pick<SessionsRepo, 'setChosenModel'>;
  audit: AuditService;
  runtime: Pick<RuntimeService, 'catalog' | 'checkChoice' | 'appliedDefault'>;
  owned: (ctx: Ctx, id: string, browserSession: string | undefined) => Promise<SessionRow>;
}) {
  const { db, repo, audit, runtime } = deps;

  async function modelOf(s: SessionRow, chosen: string | null): Promise<SessionModel> {
    const defaultModel = await runtime.appliedDefault(s.tenantId);
    const e = effectiveModel({ session: chosen, template: s.model }, defaultModel);
    return { sessionId: s.id, model: chosen, templateModel: s.model, defaultModel, effective: e ? { model: e.ref, source: e.source } : null };
  }

  return {
    /**
     * The models the caller may choose for a session or a turn (any signed-in person), with the tenant's
     * default. `all` (admin.manage_roles): every model served, each with whether the caller may choose it.
     */
    async catalog(ctx: Ctx, input: { all?: boolean } = {}) {
      const actor = requireUser(ctx, 'models');
      if (input.all && !hasPermission(actor.permissions, 'admin.manage_roles')) {
        throw new ForbiddenError('missing permission admin.manage_roles (to list every model)', { details: { permission: 'admin.manage_roles', field: 'all' } });
      }
      return runtime.catalog(actor.tenantId, actor.permissions, { all: input.all });
    },

    /** The session's model: chosen, its template's, the default, and what its next turn runs on. */
    async get(ctx: Ctx, input: { id: string; browserSession?: string }): Promise<SessionModel> {
      const s = await deps.owned(ctx, input.id, input.browserSession);
      return modelOf(s, s.chosenModel);
    },

    /**
     * Chooses the session's model (null: back to its template's or the default). Only whoever may prompt
     * the session, and only a model their roles allow and the runtime serves; audited.
     */
    async set(ctx: Ctx, input: { id: string; model: string | null; browserSession?: string }): Promise<SessionModel> {
      requirePermission(ctx, 'agents.create');
      requireTokenScope(ctx, 'sessions');
      const actor = requireUser(ctx, 'sessions');
      const s = await deps.owned(ctx, input.id, input.browserSession);
      const model = input.model || null;
      if (model) await runtime.checkChoice(s.tenantId, model, actor.permissions);
      await db.transaction(async (tx) => {
        if (!(await repo.setChosenModel(tx, s.tenantId, s.id, model))) throw new NotFoundError('session not found');
        await audit.record(tx, ctx, { action: 'session.model_set', target: `session:${s.id}`, sessionId: s.id, details: { model, before: s.chosenModel } });
      });
      return modelOf(s, model);
    },
  };
}
