import type { Database } from '../../db/database.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission, tenantOf } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { ConflictError, NotFoundError, ValidationError } from '../../kernel/errors.js';
import type { TemplateRow, TemplatesRepo } from './templates.repo.js';

const TEMPLATE_SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** Whether a permission document's `agents.use_templates` lets its holder use this template. */
export function mayUseTemplate(useTemplates: string[] | '*', slug: string): boolean {
  return useTemplates === '*' || useTemplates.includes('*') || useTemplates.includes(slug);
}

export function createTemplatesService(deps: { db: Database; repo: TemplatesRepo; audit: AuditService; checkModel: (tenantId: string, ref: string) => Promise<void> }) {
  const { db, repo, audit } = deps;

  async function load(tenantId: string, slug: string): Promise<TemplateRow> {
    const t = await repo.find(db, tenantId, slug);
    if (!t) throw new NotFoundError(`template "${slug}" not found`);
    return t;
  }

  return {
    /** Templates the caller may start sessions from (its agents.use_templates); all of them for admins. */
    async list(ctx: Ctx): Promise<TemplateRow[]> {
      const tenantId = tenantOf(ctx);
      const rows = await repo.list(db, tenantId);
      if (ctx.actor.kind !== 'user' || ctx.actor.permissions.admin.manage_templates) return rows;
      const use = ctx.actor.permissions.agents.use_templates;
      return rows.filter((t) => mayUseTemplate(use, t.slug));
    },

    /** Every template of the tenant (admin.manage_templates). */
    async listAll(ctx: Ctx): Promise<TemplateRow[]> {
      const tenantId = requirePermission(ctx, 'admin.manage_templates');
      return repo.list(db, tenantId);
    },

    async get(ctx: Ctx, slug: string): Promise<TemplateRow> {
      const tenantId = requirePermission(ctx, 'admin.manage_templates');
      return load(tenantId, slug);
    },

    /** Creates a template (admin.manage_templates). A model override must name a provider's model. */
    async create(ctx: Ctx, input: { slug: string; name: string; systemPrompt?: string; model?: string | null }): Promise<TemplateRow> {
      const tenantId = requirePermission(ctx, 'admin.manage_templates');
      if (!TEMPLATE_SLUG.test(input.slug)) throw new ValidationError('slug must be lower-case letters, digits and dashes');
      if (input.model) await deps.checkModel(tenantId, input.model);
      return db.transaction(async (tx) => {
        const row = await repo.insert(tx, { tenantId, slug: input.slug, name: input.name, systemPrompt: input.systemPrompt ?? '', model: input.model ?? null });
        if (!row) throw new ConflictError(`template "${input.slug}" already exists`);
        await audit.record(tx, ctx, { action: 'template.create', target: `template:${input.slug}`, details: { name: input.name, model: input.model ?? null } });
        return row;
      });
    },

    /** Changes a template. Sessions created earlier keep their snapshot (SPEC.md: later edits do not change them). */
    async update(ctx: Ctx, slug: string, patch: { name?: string; systemPrompt?: string; model?: string | null }): Promise<TemplateRow> {
      const tenantId = requirePermission(ctx, 'admin.manage_templates');
      const t = await load(tenantId, slug);
      if (patch.model) await deps.checkModel(tenantId, patch.model);
      return db.transaction(async (tx) => {
        const row = await repo.update(tx, tenantId, t.id, { name: patch.name ?? t.name, systemPrompt: patch.systemPrompt ?? t.systemPrompt, model: patch.model === undefined ? t.model : patch.model });
        await audit.record(tx, ctx, { action: 'template.update', target: `template:${slug}`, details: { changed: Object.keys(patch) } });
        return row;
      });
    },

    async remove(ctx: Ctx, slug: string): Promise<void> {
      const tenantId = requirePermission(ctx, 'admin.manage_templates');
      const t = await load(tenantId, slug);
      await db.transaction(async (tx) => {
        await repo.remove(tx, tenantId, t.id);
        await audit.record(tx, ctx, { action: 'template.delete', target: `template:${slug}`, details: {} });
      });
    },
  };
}
