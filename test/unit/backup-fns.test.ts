import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { BACKUP_FORMAT, backupsToPrune, encryptionKeyId, isSqliteDatabase, jwtSecretId, keepPath, restoreProblems, sealedKeyId, timedBackupName, type BackupManifest } from '../../src/core/backup/backup-fns.js';
import { createSecretBox } from '../../src/lib/secret-box.js';

const key = () => randomBytes(32).toString('base64url');

describe('what a backup keeps of the data dir', () => {
  it('keeps workspaces, tenants\' shared files and runtime homes with their transcripts', () => {
    for (const p of ['workspaces/t/u/src/main.ts', 'workspaces/t/u/.git/HEAD', 'tenants/t/shared/notes.md', 'runtimes/u/home/.local/share/opencode/opencode.db', 'runtimes/u/home/.config/opencode/x.json', 'runtimes/u']) {
      expect(keepPath(p), p).toBe(true);
    }
  });

  it('leaves out the embedded database, sockets, what a runtime rebuilds at each start, caches, logs and SQLite journals', () => {
    for (const p of ['pglite/base/1', 'run/.s.PGSQL.5432', 'runtimes/plugin/package.json', 'runtimes/u/etc/passwd', 'runtimes/u/managed/opencode.json', 'runtimes/u/tmp/x', 'runtimes/u/run/api.sock', 'runtimes/u/home/.cache/opencode/bin/x', 'runtimes/u/home/.local/share/opencode/log/1.log', 'runtimes/u/home/.local/share/opencode/opencode.db-wal', 'runtimes/u/home/.local/share/opencode/opencode.db-shm', 'config.env']) {
      expect(keepPath(p), p).toBe(false);
    }
  });

  it('copies opencode\'s SQLite database through SQLite, other files as they are', () => {
    expect(isSqliteDatabase('runtimes/u/home/.local/share/opencode/opencode.db')).toBe(true);
    expect(isSqliteDatabase('workspaces/t/u/app.db')).toBe(false);
  });
});

describe('the secrets a restore needs', () => {
  it('reads the key id a sealed value carries, and only from a whole sealed value', () => {
    const k = key();
    const sealed = createSecretBox([k]).seal('sk-live-123');
    expect(sealedKeyId(sealed)).toBe(encryptionKeyId(k));
    expect(sealedKeyId('a note about v1.deadbeef.stuff')).toBeNull();
    expect(sealedKeyId(null)).toBeNull();
  });

  const manifest = (o: Partial<BackupManifest> = {}): BackupManifest => ({
    format: BACKUP_FORMAT,
    createdAt: '2026-11-27T00:00:00Z',
    appVersion: '0.1.0',
    database: { mode: 'postgres', migrations: ['0001_a', '0002_b'], tables: [], sequences: [] },
    secrets: { encryptionKeyIds: [], jwtSecretId: jwtSecretId('jwt-secret-of-the-old-host-xxxxxxxxxxxxx') },
    entries: {},
    ...o,
  });

  it('restores where the secrets match (the key may be a previous one) and the migrations are known', () => {
    const old = key();
    const m = manifest({ secrets: { encryptionKeyIds: [encryptionKeyId(old)], jwtSecretId: jwtSecretId('jwt-secret-of-the-old-host-xxxxxxxxxxxxx') } });
    expect(restoreProblems(m, { migrations: ['0001_a', '0002_b', '0003_c'], encryptionKeys: [key(), old], jwtSecret: 'jwt-secret-of-the-old-host-xxxxxxxxxxxxx' })).toEqual([]);
  });

  it('names the missing key and the other JWT secret, and refuses a backup of a newer release', () => {
    const m = manifest({ database: { mode: 'postgres', migrations: ['0001_a', '0002_b', '0099_future'], tables: [], sequences: [] }, secrets: { encryptionKeyIds: [encryptionKeyId(key())], jwtSecretId: jwtSecretId('another') } });
    const problems = restoreProblems(m, { migrations: ['0001_a', '0002_b'], encryptionKeys: [key()], jwtSecret: 'mine' });
    expect(problems.map((p) => p.variable ?? 'release')).toEqual(['release', 'AGENTWS_ENCRYPTION_KEY', 'AGENTWS_JWT_SECRET']);
    expect(problems[0].message).toMatch(/newer release.*0099_future/);
  });

  it('the JWT secret\'s id does not show the secret', () => {
    const secret = 'a-very-secret-jwt-signing-key-1234567890';
    expect(jwtSecretId(secret)).toMatch(/^[0-9a-f]{16}$/);
    expect(jwtSecretId(secret)).not.toContain(secret.slice(0, 6));
  });
});

describe('scheduled backups', () => {
  it('are named by time, and only the newest `keep` of them stay (nothing else in the directory is touched)', () => {
    expect(timedBackupName(new Date('2026-11-27T03:15:00.123Z'))).toBe('agentws-2026-11-27T031500.123Z.tar.gz');
    const names = ['agentws-2026-11-25T031500.000Z.tar.gz', 'notes.txt', 'agentws-2026-11-27T031500.000Z.tar.gz', 'agentws-2026-11-26T031500.000Z.tar.gz', 'agentws-manual.tar.gz', 'agentws-2026-11-24T031500.000Z.tar.gz.partial'];
    expect(backupsToPrune(names, 2)).toEqual(['agentws-2026-11-25T031500.000Z.tar.gz']);
    expect(backupsToPrune(names, 5)).toEqual([]);
    expect(backupsToPrune(names, 0)).toEqual([]);
  });
});
