import type { Queryable } from '../../db/database.js';

/**
 * The SQL of backups: the schema as the catalog describes it (tables, their columns, foreign keys,
 * sequences), rows out as JSON through a cursor, rows in through json_populate_recordset, which turns
 * JSON back into every column type this schema uses (bytea, vector, arrays, jsonb, timestamps). Only the
 * `public` schema: the job queue's own schema is rebuilt by pg-boss (its queued jobs are not kept).
 */
export interface TableInfo {
  name: string;
  /** Columns a row is inserted with (generated columns are computed again). */
  columns: string[];
  /** Has a GENERATED ALWAYS identity column: its values are kept with OVERRIDING SYSTEM VALUE. */
  identityAlways: boolean;
}

const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;

export function createBackupRepo() {
  return {
    async tables(q: Queryable): Promise<TableInfo[]> {
      const { rows } = await q.query<{ name: string; columns: string[]; identity_always: boolean }>(
        `select c.relname as name,
                array_agg(a.attname::text order by a.attnum) filter (where a.attgenerated = '') as columns,
                bool_or(a.attidentity = 'a') as identity_always
           from pg_class c
           join pg_namespace n on n.oid = c.relnamespace
           join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
          where n.nspname = 'public' and c.relkind = 'r'
          group by c.relname
          order by c.relname`,
      );
      return rows.map((r) => ({ name: r.name, columns: r.columns ?? [], identityAlways: r.identity_always }));
    },

    async foreignKeys(q: Queryable): Promise<Array<{ table: string; name: string; definition: string }>> {
      const { rows } = await q.query<{ table: string; name: string; definition: string }>(
        `select cl.relname as table, co.conname as name, pg_get_constraintdef(co.oid) as definition
           from pg_constraint co
           join pg_class cl on cl.oid = co.conrelid
           join pg_namespace n on n.oid = cl.relnamespace
          where co.contype = 'f' and n.nspname = 'public'
          order by cl.relname, co.conname`,
      );
      return rows;
    },

    /** The schema's sequences and where they stand (identity columns' sequences included). */
    async sequences(q: Queryable): Promise<Array<{ name: string; lastValue: string | null }>> {
      const { rows } = await q.query<{ name: string; last_value: string | null }>(
        `select s.sequencename as name, s.last_value::text as last_value from pg_sequences s where s.schemaname = 'public' order by 1`,
      );
      return rows.map((r) => ({ name: r.name, lastValue: r.last_value }));
    },

    /** Every row of the table as a JSON text, `batch` at a time, through a cursor (call inside a transaction). */
    async dumpTable(tx: Queryable, table: string, onRows: (rows: string[]) => Promise<void> | void, batch = 1000): Promise<number> {
      await tx.query(`declare agentws_backup_rows no scroll cursor for select row_to_json(t)::text as j from public.${ident(table)} t`);
      let total = 0;
      try {
        for (;;) {
          const { rows } = await tx.query<{ j: string }>(`fetch ${batch} from agentws_backup_rows`);
          if (!rows.length) break;
          total += rows.length;
          await onRows(rows.map((r) => r.j));
        }
      } finally {
        await tx.query(`close agentws_backup_rows`);
      }
      return total;
    },

    /** Inserts rows (JSON texts of row_to_json) into the table, keeping identity values as they were. */
    async loadRows(tx: Queryable, t: TableInfo, rows: string[]): Promise<void> {
      if (!rows.length) return;
      const cols = t.columns.map(ident).join(', ');
      await tx.query(
        `insert into public.${ident(t.name)} (${cols}) ${t.identityAlways ? 'overriding system value' : ''}
         select ${cols} from json_populate_recordset(null::public.${ident(t.name)}, $1::json)`,
        [`[${rows.join(',')}]`],
      );
    },

    async dropForeignKey(tx: Queryable, table: string, name: string): Promise<void> {
      await tx.query(`alter table public.${ident(table)} drop constraint ${ident(name)}`);
    },
    async addForeignKey(tx: Queryable, table: string, name: string, definition: string): Promise<void> {
      await tx.query(`alter table public.${ident(table)} add constraint ${ident(name)} ${definition}`);
    },

    async setSequence(tx: Queryable, name: string, lastValue: string | null): Promise<void> {
      // A sequence never used (null) is left to start where it starts.
      if (lastValue === null) return;
      await tx.query(`select setval($1::regclass, $2::bigint, true)`, [`public.${ident(name)}`, lastValue]);
    },

    /** Whether the database holds anything of an installation (a tenant, a user, an audit entry); false before its migrations. */
    async holdsData(q: Queryable): Promise<boolean> {
      const { rows: has } = await q.query<{ t: string | null }>(`select to_regclass('public.tenants')::text as t`);
      if (!has[0].t) return false;
      const { rows } = await q.query<{ any: boolean }>(
        `select exists (select 1 from tenants) or exists (select 1 from users) or exists (select 1 from audit_log) as any`,
      );
      return rows[0].any;
    },
  };
}

export type BackupRepo = ReturnType<typeof createBackupRepo>;
