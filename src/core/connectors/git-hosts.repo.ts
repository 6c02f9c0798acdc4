import type { Queryable } from '../../db/database.js';
import type { GitAccessRule } from './git-fns.js';

export interface GitHostRow {
  id: string;
  tenantId: string;
  name: string;
  baseUrl: string;
  username: string;
  secretSealed: string;
  access: GitAccessRule[];
  protectedRefs: string[];
  protectDefault: boolean;
  branchPrefix: string;
  createdAt: Date;
  updatedAt: Date;
}

const HOST = `h.id, h.tenant_id as "tenantId", h.name, h.base_url as "baseUrl", h.username, h.secret_sealed as "secretSealed", h.access,
  h.protected_refs as "protectedRefs", h.protect_default as "protectDefault", h.branch_prefix as "branchPrefix", h.created_at as "createdAt", h.updated_at as "updatedAt"`;

export type GitHostPatch = Partial<Pick<GitHostRow, 'baseUrl' | 'username' | 'secretSealed' | 'access' | 'protectedRefs' | 'protectDefault' | 'branchPrefix'>>;

export function createGitHostsRepo() {
  return {
    async list(q: Queryable, tenantId: string): Promise<GitHostRow[]> {
      return (await q.query<GitHostRow>(`select ${HOST} from git_hosts h where h.tenant_id = $1 order by h.name`, [tenantId])).rows;
    },
    async findByName(q: Queryable, tenantId: string, name: string): Promise<GitHostRow | null> {
      return (await q.query<GitHostRow>(`select ${HOST} from git_hosts h where h.tenant_id = $1 and h.name = $2`, [tenantId, name])).rows[0] ?? null;
    },
    /** Null when the tenant has a host of that name already. */
    async insert(q: Queryable, h: Omit<GitHostRow, 'id' | 'createdAt' | 'updatedAt'>): Promise<GitHostRow | null> {
      const { rows } = await q.query<GitHostRow>(
        `insert into git_hosts as h (tenant_id, name, base_url, username, secret_sealed, access, protected_refs, protect_default, branch_prefix)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9) on conflict (tenant_id, name) do nothing returning ${HOST}`,
        [h.tenantId, h.name, h.baseUrl, h.username, h.secretSealed, JSON.stringify(h.access), h.protectedRefs, h.protectDefault, h.branchPrefix],
      );
      return rows[0] ?? null;
    },
    /** Null when the host is gone (removed meanwhile). */
    async update(q: Queryable, tenantId: string, name: string, p: GitHostPatch): Promise<GitHostRow | null> {
      const { rows } = await q.query<GitHostRow>(
        `update git_hosts h set base_url = coalesce($3, base_url), username = coalesce($4, username), secret_sealed = coalesce($5, secret_sealed),
                access = coalesce($6::jsonb, access), protected_refs = coalesce($7, protected_refs), protect_default = coalesce($8, protect_default),
                branch_prefix = coalesce($9, branch_prefix), updated_at = now()
          where h.tenant_id = $1 and h.name = $2 returning ${HOST}`,
        [tenantId, name, p.baseUrl ?? null, p.username ?? null, p.secretSealed ?? null, p.access ? JSON.stringify(p.access) : null, p.protectedRefs ?? null, p.protectDefault ?? null, p.branchPrefix ?? null],
      );
      return rows[0] ?? null;
    },
    /** False when there was no such host. */
    async remove(q: Queryable, tenantId: string, name: string): Promise<boolean> {
      const { rowCount } = await q.query(`delete from git_hosts where tenant_id = $1 and name = $2`, [tenantId, name]);
      return (rowCount ?? 0) > 0;
    },
  };
}

export type GitHostsRepo = ReturnType<typeof createGitHostsRepo>;
