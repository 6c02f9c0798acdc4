import type { Queryable } from '../../db/database.js';
import { isUuid } from '../../lib/ids.js';
import { roleNamesSql } from '../rbac/role-assignments.repo.js';

export interface UserRow {
  id: string;
  tenantId: string;
  handle: string;
  email: string;
  displayName: string;
  /** The identity provider's subject once the user has signed in; null for users made by the CLI. */
  externalSubject: string | null;
  createdAt: Date;
  /** When SCIM deactivated the user (null: active); a deactivated user cannot authenticate. */
  deactivatedAt: Date | null;
  /** The identity provider's SCIM externalId (not the OIDC subject); null unless provisioned by SCIM. */
  scimExternalId: string | null;
  /** Created or taken over by the tenant's identity provider through SCIM. */
  scimManaged: boolean;
  givenName: string;
  familyName: string;
}

const USER_COLS = `id, tenant_id as "tenantId", handle, email, display_name as "displayName", external_subject as "externalSubject", created_at as "createdAt", deactivated_at as "deactivatedAt", scim_external_id as "scimExternalId", scim_managed as "scimManaged", given_name as "givenName", family_name as "familyName"`;

export function createUsersRepo() {
  return {
    async findByEmail(q: Queryable, tenantId: string, email: string): Promise<UserRow | null> {
      const { rows } = await q.query<UserRow>(`select ${USER_COLS} from users where tenant_id = $1 and lower(email) = lower($2)`, [tenantId, email]);
      return rows[0] ?? null;
    },
    async findById(q: Queryable, tenantId: string, id: string): Promise<UserRow | null> {
      if (!isUuid(id)) return null;
      const { rows } = await q.query<UserRow>(`select ${USER_COLS} from users where tenant_id = $1 and id = $2`, [tenantId, id]);
      return rows[0] ?? null;
    },
    /** A user by id, email or handle: how people name users on the command line. */
    async findByRef(q: Queryable, tenantId: string, ref: string): Promise<UserRow | null> {
      if (isUuid(ref)) return this.findById(q, tenantId, ref);
      if (ref.includes('@')) return this.findByEmail(q, tenantId, ref);
      const { rows } = await q.query<UserRow>(`select ${USER_COLS} from users where tenant_id = $1 and handle = lower($2)`, [tenantId, ref]);
      return rows[0] ?? null;
    },
    /** Names and emails of the tenant's users among `ids` (ids of another tenant or none are left out). */
    async namesOf(q: Queryable, tenantId: string, ids: string[]): Promise<Array<{ id: string; handle: string; email: string; displayName: string }>> {
      const valid = [...new Set(ids.filter(isUuid))];
      if (!valid.length) return [];
      const { rows } = await q.query<{ id: string; handle: string; email: string; displayName: string }>(
        `select id, handle, email, display_name as "displayName" from users where tenant_id = $1 and id = any($2::uuid[])`,
        [tenantId, valid],
      );
      return rows;
    },
    /**
     * The tenant's users a person means by `text`: their id, email or handle, or their display name, each
     * as a whole value in any case ("ada" is not "Adam"). Several when a name is shared.
     */
    async matching(q: Queryable, tenantId: string, text: string): Promise<string[]> {
      const t = text.trim();
      if (!t) return [];
      if (isUuid(t)) return (await this.findById(q, tenantId, t)) ? [t] : [];
      const { rows } = await q.query<{ id: string }>(
        `select id from users where tenant_id = $1 and (lower(email) = lower($2) or handle = lower($2) or lower(display_name) = lower($2)) order by created_at`,
        [tenantId, t],
      );
      return rows.map((r) => r.id);
    },
    async findBySubject(q: Queryable, tenantId: string, subject: string): Promise<UserRow | null> {
      const { rows } = await q.query<UserRow>(`select ${USER_COLS} from users where tenant_id = $1 and external_subject = $2`, [tenantId, subject]);
      return rows[0] ?? null;
    },
    async list(q: Queryable, tenantId: string): Promise<Array<UserRow & { roles: string[] }>> {
      const { rows } = await q.query<UserRow & { roles: string[] }>(
        `select ${USER_COLS.replace(/(^|, )(\w+)/g, '$1u.$2')},
                ${roleNamesSql('u.id')} as roles
           from users u where u.tenant_id = $1 order by u.created_at, u.handle`,
        [tenantId],
      );
      return rows;
    },
    async insert(q: Queryable, u: { tenantId: string; handle: string; email: string; displayName: string; externalSubject?: string | null }): Promise<UserRow> {
      const { rows } = await q.query<UserRow>(
        `insert into users (tenant_id, handle, email, display_name, external_subject) values ($1, $2, $3, $4, $5) returning ${USER_COLS}`,
        [u.tenantId, u.handle, u.email, u.displayName, u.externalSubject ?? null],
      );
      return rows[0];
    },
    /** Refreshes what the identity provider says about a user at each sign-in. */
    async updateProfile(q: Queryable, id: string, p: { email: string; displayName: string; externalSubject: string }): Promise<UserRow> {
      const { rows } = await q.query<UserRow>(
        `update users set email = $2, display_name = $3, external_subject = $4, updated_at = now() where id = $1 returning ${USER_COLS}`,
        [id, p.email, p.displayName, p.externalSubject],
      );
      return rows[0];
    },
    /** Whether the user exists in the tenant and is not deactivated (auth/active-users.ts asks, cached). */
    async isActive(q: Queryable, tenantId: string, id: string): Promise<boolean> {
      if (!isUuid(id)) return false;
      const { rows } = await q.query<{ active: boolean }>(`select deactivated_at is null as active from users where tenant_id = $1 and id = $2`, [tenantId, id]);
      return rows[0]?.active ?? false;
    },
    async handleTaken(q: Queryable, tenantId: string, handle: string): Promise<boolean> {
      const { rowCount } = await q.query(`select 1 from users where tenant_id = $1 and handle = $2`, [tenantId, handle]);
      return rowCount === 1;
    },
    /** Deletes a user; roles, sign-ins and sessions go with it (foreign keys cascade). */
    async remove(q: Queryable, tenantId: string, id: string): Promise<void> {
      await q.query(`delete from users where tenant_id = $1 and id = $2`, [tenantId, id]);
    },
  };
}

export type UsersRepo = ReturnType<typeof createUsersRepo>;
