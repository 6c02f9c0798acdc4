import type { Queryable } from '../../db/database.js';

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

const COLS = `id, tenant_id as "tenantId", slug, name, system_prompt as "systemPrompt", model, created_at as "createdAt", updated_at as "updatedAt"`;

/** All SQL of the templates table. */
export function createTemplatesRepo() {
  return {
    async find(q: Queryable, tenantId: string, slug: string): Promise<TemplateRow | null> {
      return (await q.query<TemplateRow>(`select ${COLS} from templates where tenant_id = $1 and slug = $2`, [tenantId, slug])).rows[0] ?? null;
    },
    async list(q: Queryable, tenantId: string): Promise<TemplateRow[]> {
      return (await q.query<TemplateRow>(`select ${COLS} from templates where tenant_id = $1 order by slug`, [tenantId])).rows;
    },
    /** Null when the tenant has a template of that slug already. */
    async insert(q: Queryable, t: { tenantId: string; slug: string; name: string; systemPrompt: string; model: string | null }): Promise<TemplateRow | null> {
      const { rows } = await q.query<TemplateRow>(
        `insert into templates (tenant_id, slug, name, system_prompt, model) values ($1, $2, $3, $4, $5)
         on conflict (tenant_id, slug) do nothing returning ${COLS}`,
        [t.tenantId, t.slug, t.name, t.systemPrompt, t.model],
      );
      return rows[0] ?? null;
    },
    async update(q: Queryable, tenantId: string, id: string, t: { name: string; systemPrompt: string; model: string | null }): Promise<TemplateRow> {
      const { rows } = await q.query<TemplateRow>(
        `update templates set name = $3, system_prompt = $4, model = $5, updated_at = now() where tenant_id = $1 and id = $2 returning ${COLS}`,
        [tenantId, id, t.name, t.systemPrompt, t.model],
      );
      return rows[0];
    },
    async remove(q: Queryable, tenantId: string, id: string): Promise<void> {
      await q.query(`delete from templates where tenant_id = $1 and id = $2`, [tenantId, id]);
    },
  };
}

export type TemplatesRepo = ReturnType<typeof createTemplatesRepo>;
