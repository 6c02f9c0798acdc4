import type { Queryable } from '../../db/database.js';
import type { GatewayKind } from './platforms.js';

export interface GatewayRow {
  id: string;
  tenantId: string;
  kind: GatewayKind;
  botUsername: string;
  botId: string;
  botTokenSealed: string;
  webhookUrl: string;
  webhookSecretSealed: string | null;
  enabled: boolean;
  serviceUserId: string;
  createdAt: Date;
  updatedAt: Date;
}

const GATEWAY = `g.id, g.tenant_id as "tenantId", g.kind, g.bot_username as "botUsername", g.bot_id as "botId", g.bot_token_sealed as "botTokenSealed",
  g.webhook_url as "webhookUrl", g.webhook_secret_sealed as "webhookSecretSealed", g.enabled, g.service_user_id as "serviceUserId",
  g.created_at as "createdAt", g.updated_at as "updatedAt"`;

export function createGatewaysRepo() {
  return {
    async list(q: Queryable, tenantId: string): Promise<GatewayRow[]> {
      return (await q.query<GatewayRow>(`select ${GATEWAY} from gateways g where g.tenant_id = $1 order by g.created_at`, [tenantId])).rows;
    },
    async find(q: Queryable, tenantId: string, id: string): Promise<GatewayRow | null> {
      return (await q.query<GatewayRow>(`select ${GATEWAY} from gateways g where g.id = $1 and g.tenant_id = $2`, [id, tenantId])).rows[0] ?? null;
    },
    /** By id alone: for the public webhook route, which proves itself with the webhook secret instead. */
    async findById(q: Queryable, id: string): Promise<GatewayRow | null> {
      return (await q.query<GatewayRow>(`select ${GATEWAY} from gateways g where g.id = $1`, [id])).rows[0] ?? null;
    },
    async insert(q: Queryable, g: Pick<GatewayRow, 'tenantId' | 'kind' | 'botUsername' | 'botId' | 'botTokenSealed' | 'serviceUserId'>): Promise<GatewayRow> {
      const { rows } = await q.query<GatewayRow>(
        `insert into gateways as g (tenant_id, kind, bot_username, bot_id, bot_token_sealed, service_user_id) values ($1, $2, $3, $4, $5, $6) returning ${GATEWAY}`,
        [g.tenantId, g.kind, g.botUsername, g.botId, g.botTokenSealed, g.serviceUserId],
      );
      return rows[0];
    },
    /** Null when the gateway is gone (deleted meanwhile). */
    async update(q: Queryable, tenantId: string, id: string, p: { enabled?: boolean; botTokenSealed?: string; webhookUrl?: string; webhookSecretSealed?: string }): Promise<GatewayRow | null> {
      const { rows } = await q.query<GatewayRow>(
        `update gateways g set enabled = coalesce($3, enabled), bot_token_sealed = coalesce($4, bot_token_sealed), webhook_url = coalesce($5, webhook_url),
                webhook_secret_sealed = coalesce($6, webhook_secret_sealed), updated_at = now()
          where g.id = $1 and g.tenant_id = $2 returning ${GATEWAY}`,
        [id, tenantId, p.enabled ?? null, p.botTokenSealed ?? null, p.webhookUrl ?? null, p.webhookSecretSealed ?? null],
      );
      return rows[0] ?? null;
    },
    /** Ids of the gateways whose service user this is (they act as it for paired chat users). */
    async servedBy(q: Queryable, tenantId: string, userId: string): Promise<string[]> {
      const { rows } = await q.query<{ id: string }>(`select id from gateways where tenant_id = $1 and service_user_id = $2`, [tenantId, userId]);
      return rows.map((r) => r.id);
    },
    /** False when there was no such gateway (deleted meanwhile). */
    async remove(q: Queryable, tenantId: string, id: string): Promise<boolean> {
      const { rowCount } = await q.query(`delete from gateways where id = $1 and tenant_id = $2`, [id, tenantId]);
      return (rowCount ?? 0) > 0;
    },
  };
}

export type GatewaysRepo = ReturnType<typeof createGatewaysRepo>;
