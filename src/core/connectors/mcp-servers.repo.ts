import type { Queryable } from '../../db/database.js';
import type { McpAccessEntry, McpAuthKind } from './mcp-fns.js';

export interface McpServerRow {
  id: string;
  tenantId: string;
  name: string;
  url: string;
  authKind: McpAuthKind;
  authHeader: string | null;
  secretSealed: string | null;
  access: McpAccessEntry[];
  enabled: boolean;
  createdAt: Date;
  updatedAt: Date;
}

const SERVER = `s.id, s.tenant_id as "tenantId", s.name, s.url, s.auth_kind as "authKind", s.auth_header as "authHeader",
  s.secret_sealed as "secretSealed", s.access, s.enabled, s.created_at as "createdAt", s.updated_at as "updatedAt"`;

/** The SQL of mcp_servers; every query is filtered by tenant. */
export function createMcpServersRepo() {
  return {
    async list(q: Queryable, tenantId: string): Promise<McpServerRow[]> {
      return (await q.query<McpServerRow>(`select ${SERVER} from mcp_servers s where s.tenant_id = $1 order by s.name`, [tenantId])).rows;
    },
    async find(q: Queryable, tenantId: string, name: string): Promise<McpServerRow | null> {
      return (await q.query<McpServerRow>(`select ${SERVER} from mcp_servers s where s.tenant_id = $1 and s.name = $2`, [tenantId, name])).rows[0] ?? null;
    },
    /** Null when the name is taken in the tenant. */
    async insert(q: Queryable, s: Pick<McpServerRow, 'tenantId' | 'name' | 'url' | 'authKind' | 'authHeader' | 'secretSealed' | 'access' | 'enabled'>): Promise<McpServerRow | null> {
      const { rows } = await q.query<McpServerRow>(
        `insert into mcp_servers as s (tenant_id, name, url, auth_kind, auth_header, secret_sealed, access, enabled) values ($1, $2, $3, $4, $5, $6, $7, $8)
         on conflict (tenant_id, name) do nothing returning ${SERVER}`,
        [s.tenantId, s.name, s.url, s.authKind, s.authHeader, s.secretSealed, JSON.stringify(s.access), s.enabled],
      );
      return rows[0] ?? null;
    },
    /** Writes the whole row's mutable part (the service merged the patch); null when it is gone. */
    async update(q: Queryable, tenantId: string, name: string, s: Pick<McpServerRow, 'url' | 'authKind' | 'authHeader' | 'secretSealed' | 'access' | 'enabled'>): Promise<McpServerRow | null> {
      const { rows } = await q.query<McpServerRow>(
        `update mcp_servers s set url = $3, auth_kind = $4, auth_header = $5, secret_sealed = $6, access = $7, enabled = $8, updated_at = now()
          where s.tenant_id = $1 and s.name = $2 returning ${SERVER}`,
        [tenantId, name, s.url, s.authKind, s.authHeader, s.secretSealed, JSON.stringify(s.access), s.enabled],
      );
      return rows[0] ?? null;
    },
    async remove(q: Queryable, tenantId: string, name: string): Promise<boolean> {
      const { rowCount } = await q.query(`delete from mcp_servers where tenant_id = $1 and name = $2`, [tenantId, name]);
      return (rowCount ?? 0) > 0;
    },
  };
}

export type McpServersRepo = ReturnType<typeof createMcpServersRepo>;
