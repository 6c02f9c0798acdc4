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

export interface PairingCodeRow {
  id: string;
  gatewayId: string;
  code: string;
  externalUserId: string;
  externalUserName: string;
  platformDisplayName: string;
  chatId: string;
  expiresAt: Date;
  createdAt: Date;
  consumedAt: Date | null;
}

export interface PairedUserRow {
  id: string;
  gatewayId: string;
  externalUserId: string;
  externalUserName: string;
  platformDisplayName: string;
  chatId: string;
  sessionId: string | null;
  pairedAt: Date;
}

const GATEWAY = `g.id, g.tenant_id as "tenantId", g.kind, g.bot_username as "botUsername", g.bot_id as "botId", g.bot_token_sealed as "botTokenSealed",
  g.webhook_url as "webhookUrl", g.webhook_secret_sealed as "webhookSecretSealed", g.enabled, g.service_user_id as "serviceUserId",
  g.created_at as "createdAt", g.updated_at as "updatedAt"`;
export const CODE = `c.id, c.gateway_id as "gatewayId", c.code, c.external_user_id as "externalUserId", c.external_user_name as "externalUserName",
  c.platform_display_name as "platformDisplayName", c.chat_id as "chatId", c.expires_at as "expiresAt", c.created_at as "createdAt", c.consumed_at as "consumedAt"`;
const PAIRED = `p.id, p.gateway_id as "gatewayId", p.external_user_id as "externalUserId", p.external_user_name as "externalUserName",
  p.platform_display_name as "platformDisplayName", p.chat_id as "chatId", p.session_id as "sessionId", p.paired_at as "pairedAt"`;
/** Pending: neither consumed nor denied, and not expired. */
export const PENDING = `c.consumed_at is null and c.denied_at is null and c.expires_at > $now`;

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
    async update(q: Queryable, id: string, p: { enabled?: boolean; botTokenSealed?: string; webhookUrl?: string; webhookSecretSealed?: string }): Promise<GatewayRow> {
      const { rows } = await q.query<GatewayRow>(
        `update gateways g set enabled = coalesce($2, enabled), bot_token_sealed = coalesce($3, bot_token_sealed), webhook_url = coalesce($4, webhook_url),
                webhook_secret_sealed = coalesce($5, webhook_secret_sealed), updated_at = now()
          where g.id = $1 returning ${GATEWAY}`,
        [id, p.enabled ?? null, p.botTokenSealed ?? null, p.webhookUrl ?? null, p.webhookSecretSealed ?? null],
      );
      return rows[0];
    },
    async remove(q: Queryable, id: string): Promise<void> {
      await q.query(`delete from gateways where id = $1`, [id]);
    },

    async pendingCodes(q: Queryable, gatewayId: string | null, tenantId: string | null, now: Date): Promise<Array<PairingCodeRow & { gatewayKind: string; botUsername: string }>> {
      const { rows } = await q.query<PairingCodeRow & { gatewayKind: string; botUsername: string }>(
        `select ${CODE}, g.kind as "gatewayKind", g.bot_username as "botUsername" from pairing_codes c join gateways g on g.id = c.gateway_id
          where ${PENDING.replace('$now', '$1')} and ($2::uuid is null or c.gateway_id = $2) and ($3::uuid is null or g.tenant_id = $3)
          order by c.created_at`,
        [now, gatewayId, tenantId],
      );
      return rows;
    },
    async pairedUsers(q: Queryable, gatewayId: string): Promise<PairedUserRow[]> {
      return (await q.query<PairedUserRow>(`select ${PAIRED} from paired_users p where p.gateway_id = $1 order by p.paired_at`, [gatewayId])).rows;
    },
    async pairedUserBySession(q: Queryable, sessionId: string): Promise<PairedUserRow | null> {
      return (await q.query<PairedUserRow>(`select ${PAIRED} from paired_users p where p.session_id = $1`, [sessionId])).rows[0] ?? null;
    },
  };
}

export type GatewaysRepo = ReturnType<typeof createGatewaysRepo>;
