import type { Queryable } from '../../db/database.js';
import type { CodeHostKind } from './codehost-contract.js';

/** A git host's webhook settings (migration 0038's columns of git_hosts). */
export interface WebhookRow {
  hostId: string;
  tenantId: string;
  name: string;
  kind: CodeHostKind | null;
  webhookId: string | null;
  secretSealed: string | null;
  enabled: boolean;
  mention: string;
  label: string;
  repos: string[];
}


const WEBHOOK = `h.id as "hostId", h.tenant_id as "tenantId", h.name, h.kind, h.webhook_id as "webhookId", h.webhook_secret_sealed as "secretSealed",
  h.webhook_enabled as enabled, h.mention, h.trigger_label as label, h.webhook_repos as repos`;

export type WebhookPatch = Partial<Pick<WebhookRow, 'kind' | 'webhookId' | 'secretSealed' | 'enabled' | 'mention' | 'label' | 'repos'>>;

/**
 * The admin side of code-host webhooks: the webhook columns of git_hosts (the host's other
 * columns stay git-hosts.repo.ts's). The deliveries log is codehost-deliveries.repo.ts's.
 */
export function createCodeHostAdminRepo() {
  return {
    async find(q: Queryable, tenantId: string, name: string): Promise<WebhookRow | null> {
      return (await q.query<WebhookRow>(`select ${WEBHOOK} from git_hosts h where h.tenant_id = $1 and h.name = $2`, [tenantId, name])).rows[0] ?? null;
    },
    /** Locks the host's row: a change made from its current settings (two admins rotating at once get one secret each, in turn). */
    async findForUpdate(q: Queryable, tenantId: string, name: string): Promise<WebhookRow | null> {
      return (await q.query<WebhookRow>(`select ${WEBHOOK} from git_hosts h where h.tenant_id = $1 and h.name = $2 for update`, [tenantId, name])).rows[0] ?? null;
    },
    /** Writes the fields given (undefined: unchanged). Null when the host is gone. */
    async update(q: Queryable, tenantId: string, hostId: string, p: WebhookPatch): Promise<WebhookRow | null> {
      const columns: Record<keyof WebhookPatch, string> = {
        kind: 'kind', webhookId: 'webhook_id', secretSealed: 'webhook_secret_sealed', enabled: 'webhook_enabled', mention: 'mention', label: 'trigger_label', repos: 'webhook_repos',
      };
      const sets: string[] = [];
      const values: unknown[] = [tenantId, hostId];
      for (const [key, column] of Object.entries(columns) as Array<[keyof WebhookPatch, string]>) {
        if (p[key] === undefined) continue;
        values.push(p[key]);
        sets.push(`${column} = $${values.length}`);
      }
      const { rows } = await q.query<WebhookRow>(`update git_hosts h set ${[...sets, 'updated_at = now()'].join(', ')} where h.tenant_id = $1 and h.id = $2 returning ${WEBHOOK}`, values);
      return rows[0] ?? null;
    },
  };
}

export type CodeHostAdminRepo = ReturnType<typeof createCodeHostAdminRepo>;
