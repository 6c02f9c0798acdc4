import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { runtimeRoot } from '../core/runtime/host/managed-config.js';
import { answerFiles } from '../core/runtime/host/workspace-files.js';
import { answerSnapshots, snapshotStore } from '../core/runtime/host/workspace-snapshots.js';
import type { Logger } from '../kernel/logger.js';
import { workspacePath } from '../lib/data-paths.js';
import { json, readJson } from './order-replies.js';
import { LEASE_IN_USE_MS, type RunnerRuntimes, type RunnerState } from './runner-state.js';
import { ArchiveRefused, discard, hasCopy, importArchive, markCopy, readCopy, setAside, userPaths } from './user-files.js';

/** The control plane's orders about users' files here: their copies, their workspace, their snapshots, a drain's move. */
export function createUserFileOrders(o: { dataDir: string; state: RunnerState; runtimes: RunnerRuntimes; log: Logger }) {
  const { state, runtimes, log } = o;

  /**
   * Before a runtime starts on the user's files here: are they the copy the control plane says is current
   * (`filesFence`, the copy's marker)? If not (a drain left them here, or this runner was lost and the
   * user worked elsewhere meanwhile), they are set aside and the runtime starts on a fresh workspace.
   * Unmarked files (from before copies were marked) are current only for a placement from before too
   * (`filesFence` 0). Returns where they were set aside, if they were.
   */
  function checkCopy(owner: { tenantId: string; userId: string }, filesFence: number): string | null {
    if (!Number.isSafeInteger(filesFence) || filesFence < 0) return null;
    const copy = readCopy(o.dataDir, owner.userId);
    let where: string | null = null;
    if (copy ? copy.filesFence !== filesFence : filesFence !== 0 && hasCopy(o.dataDir, owner)) {
      where = setAside(o.dataDir, owner, `not the user's current copy (this copy: ${copy?.filesFence ?? 'unmarked'}; current: ${filesFence})`);
      if (where) log.warn({ userId: owner.userId, where }, 'set aside a copy of a user\'s files that is not their current one: their runtime starts on a fresh workspace');
    }
    markCopy(o.dataDir, owner, filesFence);
    return where;
  }

  /** Whether this runner holds the user's files for that tenant: a lease, or their current copy here. */
  function holdsFiles(owner: { tenantId: string; userId: string }): boolean {
    // Ids first: they name paths under the data dir.
    if (!userPaths(owner)) return false;
    const lease = state.leases.get(owner.userId);
    return lease ? lease.tenantId === owner.tenantId : readCopy(o.dataDir, owner.userId)?.tenantId === owner.tenantId;
  }

  /**
   * Snapshots of a person's workspace held here (what each turn changed, undo and redo: the control
   * plane's turn-snapshots.ts), taken and restored here with the confined walk of workspace-snapshots.ts
   * into the store beside their runtime's files. Only for a user this runner holds, in the tenant named.
   */
  async function serveSnapshots(userId: string, op: string, q: URLSearchParams, req: Http2ServerRequest, res: Http2ServerResponse) {
    const owner = { tenantId: q.get('tenantId') ?? '', userId };
    if (!holdsFiles(owner)) {
      req.resume();
      return json(res, 404, { error: 'not_found', message: 'your workspace is not on this runner host' });
    }
    const body = await readJson(req);
    if (!body || typeof body !== 'object' || Array.isArray(body)) return json(res, 400, { error: 'validation_failed', message: 'a JSON object' });
    const a = await answerSnapshots(join(o.dataDir, workspacePath(owner)), snapshotStore(runtimeRoot(o.dataDir, userId)), op, body as Record<string, unknown>);
    return json(res, a.status, a.json);
  }

  /**
   * A person's workspace files (browse, read, archive, upload: the control plane's workspace files
   * service), answered here with the same confined walk as on serve (workspace-files.ts), whether or not
   * their runtime runs. Only for a user this runner holds, or whose current copy is here, in the tenant
   * named: never another user's files.
   */
  async function serveFiles(userId: string, op: string, q: URLSearchParams, req: Http2ServerRequest, res: Http2ServerResponse) {
    const owner = { tenantId: q.get('tenantId') ?? '', userId };
    if (!holdsFiles(owner)) {
      req.resume();
      return json(res, 404, { error: 'workspace_empty', message: 'your workspace has no files on this runner host yet' });
    }
    const a = await answerFiles(join(o.dataDir, workspacePath(owner)), op, q, req as unknown as Readable);
    if ('json' in a) return json(res, a.status, a.json);
    res.writeHead(a.status, a.headers);
    if ('writeTo' in a) {
      // Written as the walk reads (an archive): a failure midway cuts the stream, which the control plane sees.
      await a.writeTo(res).then(
        () => res.end(),
        () => res.stream.close(),
      );
      return;
    }
    a.stream.on('error', () => res.stream.close());
    res.on('close', () => a.stream.destroy());
    a.stream.pipe(res);
  }

  /**
   * A user's files as a tar stream (a drain moves them to another runner): their workspace and their
   * runtime's home (its sessions database, so transcripts move too); never the sockets or scratch files.
   * Only for a user whose runtime is stopped here (the control plane stops it first).
   */
  function exportUser(tenantId: string, userId: string, res: Http2ServerResponse) {
    const p = userPaths({ tenantId, userId });
    if (!p) return json(res, 400, { error: 'validation_failed', message: 'tenantId and userId' });
    if (runtimes.live().some((l) => l.userId === userId)) return json(res, 409, { error: 'runtime_running', message: 'stop the runtime before moving its files' });
    const present = [p.workspace, p.home].filter((x) => existsSync(join(o.dataDir, x)));
    res.writeHead(200, { 'content-type': 'application/x-tar' });
    if (!present.length) {
      // An empty archive: two zero blocks.
      res.end(Buffer.alloc(1024));
      return;
    }
    const tar = spawn('tar', ['-C', o.dataDir, '-cf', '-', '--', ...present], { stdio: ['ignore', 'pipe', 'pipe'] });
    tar.stdout.pipe(res);
    tar.stderr.on('data', (c) => log.warn({ userId, tar: String(c).trim() }, 'export'));
    res.on('close', () => tar.kill());
  }

  /**
   * A drain's copy of a user's files, from the runner they leave (which may be hostile): inspected and
   * extracted apart, then put in place of any copy here, marked as the copy current under `filesFence`
   * (user-files.ts importArchive). A refused archive changes nothing here (422 archive_refused).
   */
  async function importUser(tenantId: string, userId: string, filesFence: number, req: Http2ServerRequest, res: Http2ServerResponse) {
    if (!userPaths({ tenantId, userId }) || !Number.isSafeInteger(filesFence) || filesFence <= 0) {
      req.resume();
      return json(res, 400, { error: 'validation_failed', message: 'tenantId, userId and filesFence' });
    }
    if (runtimes.live().some((l) => l.userId === userId)) {
      req.resume();
      return json(res, 409, { error: 'runtime_running', message: 'the user\'s runtime runs here: not replacing their files' });
    }
    try {
      const r = await importArchive(o.dataDir, { tenantId, userId, filesFence }, req as unknown as Readable);
      return json(res, 200, { imported: true, ...r });
    } catch (err) {
      req.resume();
      if (err instanceof ArchiveRefused) {
        log.error({ userId, err: err.message }, 'a drain\'s archive of a user\'s files was refused: nothing here changed');
        return json(res, 422, { error: 'archive_refused', message: err.message });
      }
      return json(res, 500, { error: 'import_failed', message: (err as Error).message.slice(0, 300) });
    }
  }

  /**
   * The files of a user this runner does not hold (no lease, no runtime) go out of every sandbox's reach:
   * removed (`discard`: a drain confirmed their copy elsewhere) or set aside for an operator (`setAside`:
   * they are not the user's current copy). Null: the user is held here, nothing is done.
   */
  function dropCopy(owner: { tenantId: string; userId: string }, how: 'discard' | 'setAside', why: string): { done: boolean; where?: string | null } | null {
    if (!userPaths(owner)) return { done: false };
    // The control plane asks only for users placed elsewhere: a lease still here is left over (its
    // runtime stopped idle), unless a start asked for it just now.
    const lease = state.leases.get(owner.userId);
    if ((lease && Date.now() - lease.at < LEASE_IN_USE_MS) || runtimes.live().some((l) => l.userId === owner.userId)) return null;
    state.leases.delete(owner.userId);
    if (how === 'discard') return { done: discard(o.dataDir, owner) };
    const where = setAside(o.dataDir, owner, why);
    if (where) log.warn({ userId: owner.userId, tenantId: owner.tenantId, where, why }, 'a copy of a user\'s files that is not their current one was set aside (an operator may recover it)');
    return { done: where !== null, where };
  }

  return { checkCopy, serveSnapshots, serveFiles, exportUser, importUser, dropCopy };
}
