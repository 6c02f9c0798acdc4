import { createHmac } from 'node:crypto';
import { keyIdOf } from '../../lib/secret-box.js';
import { WORKSPACES_DIR } from '../../lib/data-paths.js';

/**
 * The rules of a backup, pure: what goes in, what a manifest says, and whether an archive can be restored
 * here. The archive itself (tar + gzip, checksums) is backup-archive.ts; the database side backup.repo.ts.
 */

/** The archive's own format; a restore refuses a format it does not know. */
export const BACKUP_FORMAT = 1;
export const MANIFEST_PATH = 'manifest.json';
/** Where in the archive: one JSON-lines file per table, and the data dir's files under their own path. */
const DB_PREFIX = 'db/';
export const FILES_PREFIX = 'files/';

/**
 * Tables whose rows describe this moment of this host, not the organisation's data: live runtimes and
 * hosts, sign-ins in flight (and one-time sign-in links: minutes long, never brought back by a restore), model calls in flight, where users' runtimes are placed (placed afresh at
 * their next turn), the runners registered now (they register again when they dial in; their tokens are
 * kept), git connections being made (ten-minute OAuth states) and the migrations table (a restore
 * rebuilds the schema by migrating).
 */
export const TRANSIENT_TABLES: readonly string[] = ['agent_runtimes', 'runtime_hosts', 'auth_login_states', 'auth_sign_in_links', 'model_call_holds', 'runtime_placements', 'runners', 'schema_migrations', 'git_oauth_states'];

/**
 * Which paths of the data dir (relative, '/'-separated) belong in a backup: workspaces, the tenants'
 * shared files and each runtime's home (its transcripts, in opencode's SQLite database, which is copied
 * through SQLite's own backup so a runtime writing meanwhile cannot tear it). Not: the embedded database's
 * files (dumped through SQL instead), sockets and lock files, what a runtime rebuilds at each start
 * (its etc, managed config, tmp, run dir, the plugin dir), caches and logs.
 */
export function keepPath(rel: string): boolean {
  const parts = rel.split('/');
  const [top] = parts;
  if (top === WORKSPACES_DIR || top === 'tenants') return true;
  if (top !== 'runtimes') return false;
  // runtimes/<userId>/home/...
  if (parts.length >= 2 && parts[1] === 'plugin') return false;
  if (parts.length >= 3 && parts[2] !== 'home') return false;
  const inHome = parts.slice(3);
  if (inHome[0] === '.cache') return false;
  if (inHome.join('/').startsWith('.local/share/opencode/log')) return false;
  // The SQLite database is copied whole through its backup; its journal files would contradict that copy.
  if (/\.db-(wal|shm|journal)$/.test(rel)) return false;
  return true;
}

/** Whether a kept file is a SQLite database to be copied through SQLite's backup (opencode's transcripts). */
export const isSqliteDatabase = (rel: string): boolean => /^runtimes\/[^/]+\/home\/\.local\/share\/opencode\/[^/]+\.db$/.test(rel);

export interface BackupManifest {
  format: number;
  createdAt: string;
  /** The release that made it (package version). */
  appVersion: string;
  database: {
    mode: 'embedded' | 'postgres';
    migrations: string[];
    tables: Array<{ name: string; rows: number; entry: string }>;
    sequences: Array<{ name: string; lastValue: string | null }>;
  };
  /**
   * Which secrets the data needs, as ids that do not reveal them: the encryption key sealed values use
   * (the same id the sealed values carry), and the JWT secret's.
   */
  secrets: { encryptionKeyIds: string[]; jwtSecretId: string };
  /** Every entry but the manifest: its size and sha256 (hex). */
  entries: Record<string, { size: number; sha256: string }>;
}

/** The id of the JWT secret: an HMAC under it of a fixed label (the secret cannot be recovered from it). */
export const jwtSecretId = (secret: string): string => createHmac('sha256', secret).update('agentws-backup-jwt-secret-id').digest('hex').slice(0, 16);
export const encryptionKeyId = (key: string): string => keyIdOf(Buffer.from(key, 'base64url'));

/** A key id as sealed values carry it (`v1.<key id>.<iv>...`); null when the value is not sealed. */
export function sealedKeyId(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const m = /^v1\.([0-9a-f]{8})\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.exec(value);
  return m ? m[1] : null;
}

export interface RestoreProblem {
  variable?: string;
  message: string;
}

/**
 * Whether this installation can restore the archive: a format and migrations it knows (a backup from an
 * older release restores, then migrates up; one from a newer release does not), and the secrets its data
 * needs. Empty when it can.
 */
export function restoreProblems(m: BackupManifest, here: { migrations: string[]; encryptionKeys: string[]; jwtSecret: string }): RestoreProblem[] {
  const problems: RestoreProblem[] = [];
  if (m.format !== BACKUP_FORMAT) problems.push({ message: `the archive's format is ${m.format}; this release reads format ${BACKUP_FORMAT}` });
  const unknown = m.database.migrations.filter((name) => !here.migrations.includes(name));
  if (unknown.length) problems.push({ message: `the backup was made by a newer release (${m.appVersion}): its database has migrations this release does not know (${unknown.slice(0, 3).join(', ')}${unknown.length > 3 ? ', …' : ''}); restore it with that release or a later one` });
  const known = new Set(here.encryptionKeys.map(encryptionKeyId));
  const missing = m.secrets.encryptionKeyIds.filter((id) => !known.has(id));
  if (missing.length) {
    problems.push({
      variable: 'AGENTWS_ENCRYPTION_KEY',
      message: `the backup's sealed secrets (provider keys, bot tokens) were sealed with encryption key ${missing.join(', ')}, which is not configured here: set AGENTWS_ENCRYPTION_KEY (or AGENTWS_PREVIOUS_ENCRYPTION_KEYS) to the key of the installation that made it`,
    });
  }
  if (m.secrets.jwtSecretId !== jwtSecretId(here.jwtSecret)) {
    problems.push({ variable: 'AGENTWS_JWT_SECRET', message: 'is not the JWT secret of the installation that made the backup (its sign-ins, relay keys and pairing links depend on it): set the same one' });
  }
  return problems;
}

/** A JSON-lines dump entry's path for a table. */
export const tableEntry = (table: string): string => `${DB_PREFIX}${table}.jsonl`;

/** The name `aws backup create --dir` gives a backup: sortable by time (UTC), e.g. agentws-2026-11-27T031500.123Z.tar.gz. */
export const timedBackupName = (at: Date): string => `agentws-${at.toISOString().replace(/:/g, '')}.tar.gz`;
const TIMED = /^agentws-\d{4}-\d{2}-\d{2}T\d{6}\.\d{3}Z\.tar\.gz$/;

/** Which of a directory's timed backups go when only the newest `keep` stay (other files are never touched). */
export function backupsToPrune(names: string[], keep: number): string[] {
  const timed = names.filter((n) => TIMED.test(n)).sort();
  return keep > 0 ? timed.slice(0, Math.max(0, timed.length - keep)) : [];
}
