import type { Database, Queryable } from '../../db/database.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission, tenantOf } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { ConflictError, NotFoundError, ValidationError } from '../../kernel/errors.js';

/** Session templates: a system prompt and an optional model override, chosen by slug at session creation. */
export interface TemplateRow {
  id: string;
  tenantId: string;
  slug: string;
  name: string;
  systemPrompt: string;
  model: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export const TEMPLATE_SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/;
const COLS = `id, tenant_id as "tenantId", slug, name, system_prompt as "systemPrompt", model, created_at as "createdAt", updated_at as "updatedAt"`;

export function findTemplate(q: Queryable, tenantId: string, slug: string): Promise<TemplateRow | null> {
  return q.query<TemplateRow>(`select ${COLS} from templates where tenant_id = $1 and slug = $2`, [tenantId, slug]).then((r) => r.rows[0] ?? null);
}

/** Whether a permission document's `agents.use_templates` lets its holder use this template. */
export function mayUseTemplate(useTemplates: string[] | '*', slug: string): boolean {
  return useTemplates === '*' || useTemplates.includes('*') || useTemplates.includes(slug);
}

export function createTemplatesService(deps: { db: Database; audit: AuditService; checkModel: (tenantId: string, ref: string) => Promise<void> }) {
  const { db, audit } = deps;

  async function load(tenantId: string, slug: string): Promise<TemplateRow> {
    const t = await findTemplate(db, tenantId, slug);
    if (!t) throw new NotFoundError(`template "${slug}" not found`);
    return t;
  }

  return {
    /** Templates the caller may start sessions from (its agents.use_templates); all of them for admins. */
    async list(ctx: Ctx): Promise<TemplateRow[]> {
      const tenantId = tenantOf(ctx);
      const { rows } = await db.query<TemplateRow>(`select ${COLS} from templates where tenant_id = $1 order by slug`, [tenantId]);
      if (ctx.actor.kind !== 'user' || ctx.actor.permissions.admin.manage_templates) return rows;
      const use = ctx.actor.permissions.agents.use_templates;
      return rows.filter((t) => mayUseTemplate(use, t.slug));
    },

    /** Every template of the tenant (admin.manage_templates). */
    async listAll(ctx: Ctx): Promise<TemplateRow[]> {
      const tenantId = requirePermission(ctx, 'admin.manage_templates');
      return (await db.query<TemplateRow>(`select ${COLS} from templates where tenant_id = $1 order by slug`, [tenantId])).rows;
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
        const { rows } = await tx.query<TemplateRow>(
          `insert into templates (tenant_id, slug, name, system_prompt, model) values ($1, $2, $3, $4, $5)
           on conflict (tenant_id, slug) do nothing returning ${COLS}`,
          [tenantId, input.slug, input.name, input.systemPrompt ?? '', input.model ?? null],
        );
        if (!rows[0]) throw new ConflictError(`template "${input.slug}" already exists`);
        await audit.record(tx, ctx, { action: 'template.create', target: `template:${input.slug}`, details: { name: input.name, model: input.model ?? null } });
        return rows[0];
      });
    },

    /** Changes a template. Sessions created earlier keep their snapshot (SPEC.md: later edits do not change them). */
    async update(ctx: Ctx, slug: string, patch: { name?: string; systemPrompt?: string; model?: string | null }): Promise<TemplateRow> {
      const tenantId = requirePermission(ctx, 'admin.manage_templates');
      const t = await load(tenantId, slug);
      if (patch.model) await deps.checkModel(tenantId, patch.model);
      return db.transaction(async (tx) => {
        const { rows } = await tx.query<TemplateRow>(
          `update templates set name = $2, system_prompt = $3, model = $4, updated_at = now() where id = $1 returning ${COLS}`,
          [t.id, patch.name ?? t.name, patch.systemPrompt ?? t.systemPrompt, patch.model === undefined ? t.model : patch.model],
        );
        await audit.record(tx, ctx, { action: 'template.update', target: `template:${slug}`, details: { changed: Object.keys(patch) } });
        return rows[0];
      });
    },

    async remove(ctx: Ctx, slug: string): Promise<void> {
      const tenantId = requirePermission(ctx, 'admin.manage_templates');
      const t = await load(tenantId, slug);
      await db.transaction(async (tx) => {
        await tx.query(`delete from templates where id = $1`, [t.id]);
        await audit.record(tx, ctx, { action: 'template.delete', target: `template:${slug}`, details: {} });
      });
    },
  };
}

export type TemplatesService = ReturnType<typeof createTemplatesService>;
