import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, lstatSync, mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { once } from 'node:events';
import { backup as sqliteBackup, DatabaseSync } from 'node:sqlite';
import type { Database } from '../../db/database.js';
import type { Migrator } from '../../db/migrator.js';
import { readMigrations } from '../../db/migrator.js';
import type { Clock } from '../../lib/clock.js';
import type { AuditService } from '../audit/audit.service.js';
import type { Ctx } from '../../kernel/context.js';
import { ConfigError, ConflictError, ForbiddenError, ValidationError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/logger.js';
import { createArchiveWriter, extractArchive, moveInto } from './backup-archive.js';
import {
  BACKUP_FORMAT,
  backupsToPrune,
  FILES_PREFIX,
  isSqliteDatabase,
  jwtSecretId,
  keepPath,
  restoreProblems,
  sealedKeyId,
  tableEntry,
  timedBackupName,
  TRANSIENT_TABLES,
  type BackupManifest,
} from './backup-fns.js';
import type { BackupRepo } from './backup.repo.js';
import { WORKSPACES_DIR } from '../../lib/data-paths.js';

/** The data dir's parts a backup holds (keepPath says which of their files). */
const DATA_TOPS = [WORKSPACES_DIR, 'runtimes', 'tenants'] as const;
const LOAD_BATCH = 500;

export interface BackupProgress {
  step: 'database' | 'files' | 'verify' | 'restore-database' | 'restore-files' | 'migrate';
  detail?: string;
}

/**
 * `aws backup create|restore`: the database (either mode, through SQL) and the data dir that matters in
 * one archive (backup-archive.ts). A backup reads the database in one snapshot (repeatable read) while
 * serve runs, then the files: a workspace file being written meanwhile is taken as it is then (and
 * counted in `changed`); transcripts, in each runtime's SQLite database, through SQLite's backup, whole.
 * A restore goes onto an empty database and data dir only, checks the archive and the secrets first, and
 * changes nothing until the archive has proven whole. Operator only (the CLI): an archive holds every
 * tenant's data.
 */
export function createBackupService(deps: {
  db: Database;
  repo: BackupRepo;
  migrator: Migrator;
  audit: AuditService;
  clock: Clock;
  log: Logger;
  dataDir: string;
  secrets: { encryptionKey: string; previousEncryptionKeys: readonly string[]; jwtSecret: string };
}) {
  const { db, repo, log } = deps;

  function requireCli(ctx: Ctx, what: string): void {
    if (ctx.actor.kind !== 'system') throw new ForbiddenError(`${what} is only available to the operator (CLI)`);
  }

  /** The kept files of the data dir, depth first: [relative path, absolute path, lstat]. */
  function* dataFiles(): Generator<{ rel: string; abs: string; kind: 'file' | 'dir' | 'symlink'; mode: number }> {
    const walk = function* (rel: string): Generator<{ rel: string; abs: string; kind: 'file' | 'dir' | 'symlink'; mode: number }> {
      const abs = join(deps.dataDir, rel);
      let st;
      try {
        st = lstatSync(abs);
      } catch {
        return; // gone meanwhile (a runtime's tmp file)
      }
      if (st.isSymbolicLink()) return void (yield { rel, abs, kind: 'symlink', mode: st.mode });
      if (st.isFile()) return void (yield { rel, abs, kind: 'file', mode: st.mode });
      if (!st.isDirectory()) return; // sockets, fifos: nothing to keep
      yield { rel, abs, kind: 'dir', mode: st.mode };
      let names: string[] = [];
      try {
        names = readdirSync(abs).sort();
      } catch {
        return;
      }
      for (const n of names) {
        const child = `${rel}/${n}`;
        if (keepPath(child)) yield* walk(child);
      }
    };
    for (const top of DATA_TOPS) if (existsSync(join(deps.dataDir, top))) yield* walk(top);
  }

  return {
    /**
     * Writes a backup to `file` (refused when it exists), or into `dir` under a name with the time; with
     * `keep`, only the newest `keep` timed backups of `dir` stay once this one is written.
     */
    async create(ctx: Ctx, input: { file?: string; dir?: string; keep?: number; appVersion: string; onProgress?: (p: BackupProgress) => void }) {
      requireCli(ctx, 'backing up the appliance');
      if (!input.file === !input.dir) throw new ValidationError('name the archive, or a directory to write it in (--dir)', { details: { field: 'file' } });
      if (input.keep !== undefined && (!input.dir || !Number.isInteger(input.keep) || input.keep < 1)) throw new ValidationError('keep is a whole number of at least 1, with a directory (--dir)', { details: { field: 'keep' } });
      const file = input.dir ? join(resolve(input.dir), timedBackupName(deps.clock.now())) : resolve(input.file!);
      if (existsSync(file)) throw new ConflictError(`${file} exists`, { hint: 'Name a new file: a backup never overwrites one.' });
      if (!existsSync(dirname(file))) throw new ValidationError(`the directory ${dirname(file)} does not exist`, { details: { field: 'file' } });
      const work = mkdtempSync(join(dirname(file), '.agentws-backup-'));
      const writer = await createArchiveWriter(file);
      const started = Date.now();
      try {
        // 1. The database, in one snapshot; each table into a JSON-lines file first (tables can be large).
        input.onProgress?.({ step: 'database' });
        const migrations = (await deps.migrator.status()).filter((m) => m.appliedAt).map((m) => m.name);
        const keyIds = new Set<string>();
        const dumped: BackupManifest['database']['tables'] = [];
        let sequences: BackupManifest['database']['sequences'] = [];
        await db.transaction(async (tx) => {
          await tx.query('set transaction isolation level repeatable read, read only');
          for (const t of await repo.tables(tx)) {
            if (TRANSIENT_TABLES.includes(t.name)) continue;
            const sealed = t.columns.filter((c) => c.endsWith('_sealed'));
            const path = join(work, `${t.name}.jsonl`);
            const out = createWriteStream(path, { mode: 0o600 });
            const rows = await repo.dumpTable(tx, t.name, async (batch) => {
              for (const line of batch) {
                if (sealed.length) {
                  const row = JSON.parse(line) as Record<string, unknown>;
                  for (const c of sealed) {
                    const id = sealedKeyId(row[c]);
                    if (id) keyIds.add(id);
                  }
                }
                if (!out.write(`${line}\n`)) await once(out, 'drain');
              }
            });
            out.end();
            await once(out, 'close');
            dumped.push({ name: t.name, rows, entry: tableEntry(t.name) });
          }
          sequences = await repo.sequences(tx);
        });
        for (const t of dumped) await writer.addFile(t.entry, join(work, `${t.name}.jsonl`));

        // 2. The data dir's files, each read once.
        input.onProgress?.({ step: 'files' });
        const changed: string[] = [];
        let files = 0;
        for (const f of dataFiles()) {
          const name = `${FILES_PREFIX}${f.rel}`;
          if (f.kind === 'dir') await writer.addDirectory(name, f.mode);
          else if (f.kind === 'symlink') await writer.addSymlink(name, readlinkSync(f.abs));
          else if (isSqliteDatabase(f.rel)) {
            // A runtime may be writing its transcripts now: SQLite's own backup copies a consistent state.
            const copy = join(work, `sqlite-${files}.db`);
            const source = new DatabaseSync(f.abs, { readOnly: true });
            try {
              await sqliteBackup(source, copy);
            } finally {
              source.close();
            }
            await writer.addFile(name, copy);
            rmSync(copy, { force: true });
          } else if ((await writer.addFile(name, f.abs)).changed) changed.push(f.rel);
          if (f.kind !== 'dir') files++;
        }

        const manifest: Omit<BackupManifest, 'entries'> = {
          format: BACKUP_FORMAT,
          createdAt: deps.clock.now().toISOString(),
          appVersion: input.appVersion,
          database: { mode: db.mode, migrations, tables: dumped, sequences },
          secrets: { encryptionKeyIds: [...keyIds].sort(), jwtSecretId: jwtSecretId(deps.secrets.jwtSecret) },
        };
        await writer.finish(manifest);
        const bytes = lstatSync(file).size;
        await db.transaction((tx) =>
          deps.audit.record(tx, ctx, { tenantId: null, action: 'backup.created', target: `backup:${basename(file)}`, details: { bytes, tables: dumped.length, rows: dumped.reduce((n, t) => n + t.rows, 0), files } }),
        );
        if (changed.length) log.warn({ files: changed.slice(0, 20), count: changed.length }, 'files changed while they were read: they are in the backup as they were then');
        const pruned = input.dir && input.keep ? backupsToPrune(readdirSync(dirname(file)), input.keep) : [];
        for (const name of pruned) rmSync(join(dirname(file), name), { force: true });
        return { file, pruned, bytes, tables: dumped.length, rows: dumped.reduce((n, t) => n + t.rows, 0), files, changed, ms: Date.now() - started };
      } catch (err) {
        await writer.abort();
        throw err;
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    },

    /**
     * Restores a backup onto this installation's database and data dir, both empty: the archive checked
     * whole first, then the schema migrated to the backup's, the rows loaded (foreign keys checked again
     * once all are in), this release's later migrations applied, the files moved into place.
     */
    async restore(ctx: Ctx, input: { file: string; onProgress?: (p: BackupProgress) => void }) {
      requireCli(ctx, 'restoring a backup');
      const file = resolve(input.file);
      if (!existsSync(file)) throw new ValidationError(`${file} does not exist`, { details: { field: 'file' } });
      for (const top of DATA_TOPS) {
        const dir = join(deps.dataDir, top);
        if (existsSync(dir) && readdirSync(dir).length) {
          throw new ConflictError(`the data dir already holds ${top} (${dir})`, { hint: 'Restore onto a new data dir (AGENTWS_DATA_DIR) and an empty database: a restore never merges into an installation in use.' });
        }
      }
      if (await repo.holdsData(db)) {
        throw new ConflictError('the database already holds an installation (tenants, users or audit entries)', { hint: 'Restore into an empty database: create a new one and point DATABASE_URL at it (or use a new data dir with the embedded database).' });
      }

      input.onProgress?.({ step: 'verify' });
      const staging = join(deps.dataDir, `.restore-${randomBytes(6).toString('hex')}`);
      try {
        const m = await extractArchive(file, staging);
        const problems = restoreProblems(m, {
          migrations: readMigrations().map((f) => f.name),
          encryptionKeys: [deps.secrets.encryptionKey, ...deps.secrets.previousEncryptionKeys],
          jwtSecret: deps.secrets.jwtSecret,
        });
        const general = problems.filter((p) => !p.variable);
        if (general.length) throw new ValidationError(general.map((p) => p.message).join('; '), { code: 'backup_incompatible' });
        if (problems.length) throw new ConfigError(problems.map((p) => ({ variable: p.variable!, message: p.message })), { hint: 'Use the secrets of the installation the backup was made on (its config file or environment).' });
        const applied = (await deps.migrator.status()).filter((s) => s.appliedAt).map((s) => s.name);
        const ahead = applied.filter((n) => !m.database.migrations.includes(n));
        if (ahead.length) {
          throw new ConflictError(`the database is migrated past the backup (${ahead[0]}${ahead.length > 1 ? ', …' : ''}): its rows would not fit`, { hint: 'Restore into an empty database (not migrated): `aws backup restore` migrates it to the backup\'s schema, loads it, then migrates on.' });
        }

        // The schema as the backup's release left it.
        input.onProgress?.({ step: 'restore-database' });
        await deps.migrator.checkPrerequisites();
        await deps.migrator.withLock(async () => {
          for (const name of m.database.migrations) if (!applied.includes(name)) await deps.migrator.applyOne(name);
        });
        let rows = 0;
        await db.transaction(async (tx) => {
          const here = new Map((await repo.tables(tx)).map((t) => [t.name, t]));
          const fks = await repo.foreignKeys(tx);
          // Rows go in table by table in any order, then every foreign key is checked again as it is re-added.
          for (const fk of fks) await repo.dropForeignKey(tx, fk.table, fk.name);
          for (const t of m.database.tables) {
            const info = here.get(t.name);
            if (!info) throw new ValidationError(`the backup has table ${t.name}, which its own migrations do not create`, { code: 'backup_invalid' });
            const lines = createInterface({ input: createReadStream(join(staging, t.entry)), crlfDelay: Infinity });
            let batch: string[] = [];
            for await (const line of lines) {
              if (!line) continue;
              batch.push(line);
              if (batch.length >= LOAD_BATCH) {
                await repo.loadRows(tx, info, batch);
                rows += batch.length;
                batch = [];
              }
            }
            await repo.loadRows(tx, info, batch);
            rows += batch.length;
          }
          for (const s of m.database.sequences) await repo.setSequence(tx, s.name, s.lastValue);
          for (const fk of fks) await repo.addForeignKey(tx, fk.table, fk.name, fk.definition);
          await deps.audit.record(tx, ctx, { tenantId: null, action: 'backup.restored', target: `backup:${basename(file)}`, details: { createdAt: m.createdAt, appVersion: m.appVersion, tables: m.database.tables.length, rows } });
        });

        // This release's later migrations: a backup of an older release comes back upgraded.
        input.onProgress?.({ step: 'migrate' });
        const migrated = await deps.migrator.up();

        input.onProgress?.({ step: 'restore-files' });
        let files = 0;
        for (const top of DATA_TOPS) {
          const from = join(staging, FILES_PREFIX, top);
          if (!existsSync(from)) continue;
          rmSync(join(deps.dataDir, top), { recursive: true, force: true }); // empty (checked above)
          moveInto(from, join(deps.dataDir, top));
        }
        for (const e of Object.keys(m.entries)) if (e.startsWith(FILES_PREFIX)) files++;
        return { createdAt: m.createdAt, appVersion: m.appVersion, tables: m.database.tables.length, rows, files, migrated };
      } finally {
        rmSync(staging, { recursive: true, force: true });
      }
    },
  };
}
