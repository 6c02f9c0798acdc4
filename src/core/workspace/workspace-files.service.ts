import { PassThrough, pipeline, Readable } from 'node:stream';
import type { Database } from '../../db/database.js';
import { requirePermission, requireTokenScope, requireUser } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { type AppError, NotFoundError, PayloadTooLargeError, UnavailableError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/logger.js';
import { workspaceDir } from '../../lib/data-paths.js';
import { formatSize } from '../../lib/size.js';
import type { AuditService } from '../audit/audit.service.js';
import type { RuntimeOwner } from '../runtime/host/runtime-host.js';
import { dialRunner, type TunnelResponse } from '../runtime/host/runtime-transport.js';
import { archiveDir, openArchive, FILE_HEADERS, type ArchiveSink, filesError, listDir, openFile, splitPath, writeFile, WORKSPACE_FILES_ROUTE, type FileEntry, type FileOp } from '../runtime/host/workspace-files.js';

/**
 * A person's own workspace files through the API: browse, read, download a folder as an archive, upload.
 *
 * Whose: the caller's own workspace only (no route names a user, so there is no other one to ask for);
 * a role without agents.create has no agent and so no workspace (403). Where: on the host that holds the
 * files, by the person's placement: this serve's data dir (its local runner), or a runner host, reached
 * through the runner channel, which answers with the same module (host/workspace-files.ts). The runtime
 * need not run: the files are read on the host, confined to the workspace as that module says.
 */
export interface WorkspaceFilesDeps {
  db: Database;
  audit: Pick<AuditService, 'record'>;
  log: Logger;
  dataDir: string;
  /** The runner the person is placed on; null: this serve (runner-fleet.ts placement). */
  placement: (owner: RuntimeOwner) => Promise<string | null>;
  /** The person's workspace quota (bytes; null: none) and what their files took when last measured. */
  quotaOf: (owner: RuntimeOwner) => Promise<number | null>;
  usedBytes: (owner: RuntimeOwner) => Promise<number | null>;
  uploads: { fileMaxBytes: number; maxFiles: number };
  /** Starts the person's runtime where they are placed: a runner host holds their files only once it has. */
  startRuntime?: (owner: RuntimeOwner) => Promise<void>;
}

export interface UploadPart {
  /** The file's path relative to the target directory ("a.txt", or "folder/sub/a.txt" from a folder pick). */
  name: string;
  stream: Readable;
}

type Where = { root: string } | { runnerId: string };

/** What a copy between two people's workspaces left out, by why. */
export interface CopySkips {
  /** Symbolic links (never copied: their target is read nowhere). */
  links: number;
  /** `.git` directories and what is in them (the previous owner's repository metadata, hooks included). */
  git: number;
  /** Past the copy's bounds: the file count, the bytes, or the new owner's quota. */
  overLimit: number;
  /** Names the workspace rules refuse, and files that could not be written. */
  other: number;
}

export function createWorkspaceFilesService(deps: WorkspaceFilesDeps) {
  /** The caller's own workspace: authorisation first. */
  function ownerOf(ctx: Ctx): RuntimeOwner {
    const actor = requireUser(ctx, 'Workspaces');
    requirePermission(ctx, 'agents.create');
    return { tenantId: actor.tenantId, userId: actor.userId };
  }

  async function whereOf(owner: RuntimeOwner): Promise<Where> {
    let runnerId: string | null;
    try {
      runnerId = await deps.placement(owner);
    } catch (err) {
      if ((err as AppError).code === 'runtime_busy') throw new UnavailableError('no runner host can hold your workspace now', { code: 'runner_unavailable', hint: 'Try again in a moment; an admin can check `npx aws runner list`.' });
      throw err;
    }
    return runnerId ? { runnerId } : { root: workspaceDir(deps.dataDir, owner) };
  }

  /** One files request to the runner holding the person's workspace; a refusal there is thrown as here. */
  async function onRunner(runnerId: string, owner: RuntimeOwner, op: FileOp, q: Record<string, string>, o: { method?: string; body?: Readable; timeoutMs?: number } = {}): Promise<TunnelResponse> {
    const query = new URLSearchParams({ tenantId: owner.tenantId, ...q });
    let res: TunnelResponse;
    try {
      res = await dialRunner({ runnerId, userId: owner.userId }, { method: o.method ?? 'GET', path: `${WORKSPACE_FILES_ROUTE}/${op}?${query}`, headers: o.body ? { 'content-type': 'application/octet-stream' } : {}, bodyStream: o.body, timeoutMs: o.timeoutMs });
    } catch (err) {
      throw new UnavailableError(`the runner host holding your workspace cannot be reached: ${(err as Error).message}`, { code: 'runner_unavailable' });
    }
    if (res.statusCode < 300) return res;
    throw filesError(res.statusCode, await readJson(res));
  }

  /** Whether a path names something in a person's workspace (a file or a directory). */
  async function existsIn(owner: RuntimeOwner, path: string): Promise<boolean> {
    const where = await whereOf(owner);
    const parts = splitPath(path);
    const parent = parts.slice(0, -1).join('/');
    const name = parts.at(-1);
    try {
      const listed = 'root' in where ? await listDir(where.root, parent) : ((await readJson(await onRunner(where.runnerId, owner, 'list', { path: parent }, { timeoutMs: 30_000 }))) as { entries: FileEntry[] });
      return listed.entries.some((e) => e.name === name);
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      // Something that is not a directory on the way: the name is not free.
      if ((err as AppError).code === 'not_a_directory') return true;
      throw err;
    }
  }

  return {
    existsIn,

    /**
     * Copies a folder of one person's workspace into a NEW folder of another's (a session handed over:
     * session-shares.service.ts, which has authorised it). What is read was written by the agent, which
     * may be hostile: the source is read as an archive (links stored as links, multi-linked and special
     * files left out: host/workspace-files.ts) and each regular file is written as an upload is, confined
     * to the target folder (no name in the archive can leave it: `..`, absolute paths and links are
     * refused, and no link in the target is followed). Symbolic links and `.git` directories are not
     * copied; past `maxFiles`, `maxBytes` or the new owner's quota the rest is left out. Counted in `skipped`.
     */
    async copyBetween(from: RuntimeOwner, to: RuntimeOwner, input: { fromPath: string; toDir: string; maxFiles: number; maxBytes: number }): Promise<{ files: number; bytes: number; skipped: CopySkips }> {
      const toParts = splitPath(input.toDir, 'folder');
      const src = await whereOf(from);
      const dst = await whereOf(to);
      const quota = await deps.quotaOf(to);
      const used = quota === null ? 0 : ((await deps.usedBytes(to)) ?? 0);
      let room = Math.min(input.maxBytes, quota === null ? Number.MAX_SAFE_INTEGER : Math.max(0, quota - used));
      if ('runnerId' in dst && deps.startRuntime) {
        const probe = await onRunner(dst.runnerId, to, 'list', { path: '' }, { timeoutMs: 30_000 }).then((res) => (res.resume(), null), (err: unknown) => err);
        if (probe instanceof NotFoundError && probe.code === 'workspace_empty') await deps.startRuntime(to);
      }
      let source: Readable;
      try {
        source = 'root' in src ? (await archiveDir(src.root, input.fromPath)).stream : held(await onRunner(src.runnerId, from, 'archive', { path: input.fromPath }));
      } catch (err) {
        // Nothing written yet in the previous owner's workspace: nothing to copy.
        if (err instanceof NotFoundError && (err as AppError).code === 'workspace_empty') return { files: 0, bytes: 0, skipped: { links: 0, git: 0, overLimit: 0, other: 0 } };
        throw err;
      }
      const skipped: CopySkips = { links: 0, git: 0, overLimit: 0, other: 0 };
      let files = 0;
      let bytes = 0;
      // Loaded when a workspace is copied, not by every command that builds the core.
      const { extract: tarExtract } = await import('tar-stream');
      const extract = tarExtract();
      pipeline(source, extract, () => {});
      for await (const entry of extract) {
        const h = entry.header;
        // Entries are named under the archived folder's own name: what follows it is the path inside.
        const rel = h.name.split('/').slice(1).filter((p) => p !== '');
        const size = h.size ?? 0;
        let why: keyof CopySkips | null = null;
        if (h.type === 'symlink' || h.type === 'link') why = 'links';
        else if (rel.includes('.git')) why = h.type === 'file' ? 'git' : null;
        else if (h.type !== 'file') why = h.type === 'directory' ? null : 'other';
        else if (files >= input.maxFiles || size > room) why = 'overLimit';
        if (why || h.type !== 'file' || rel.includes('.git')) {
          if (why) skipped[why]++;
          entry.resume();
          continue;
        }
        const path = [...toParts, ...rel].join('/');
        try {
          const limitName = 'the hand-over copy bound';
          const body = Readable.from(entry as AsyncIterable<Buffer>);
          const r = 'root' in dst
            ? await writeFile(dst.root, path, body, { maxBytes: size, limitName })
            : ((await readJson(await onRunner(dst.runnerId, to, 'write', { path, maxBytes: String(size), limitName }, { method: 'PUT', body, timeoutMs: 0 }))) as { bytes: number });
          files++;
          bytes += r.bytes;
          room -= r.bytes;
        } catch (err) {
          entry.resume();
          skipped.other++;
          deps.log.warn({ err: (err as Error).message.slice(0, 200) }, 'a file was not copied into the new owner\'s workspace');
        }
      }
      return { files, bytes, skipped };
    },

    /** The entries of a directory of the caller's workspace ('' : its top); links shown, never followed. */
    async list(ctx: Ctx, input: { path: string }): Promise<{ path: string; entries: FileEntry[]; truncated: boolean }> {
      const owner = ownerOf(ctx);
      splitPath(input.path);
      const where = await whereOf(owner);
      try {
        if ('root' in where) return await listDir(where.root, input.path);
        return (await readJson(await onRunner(where.runnerId, owner, 'list', { path: input.path }, { timeoutMs: 30_000 }))) as never;
      } catch (err) {
        // A workspace not made yet (no turn so far) is an empty one.
        if (err instanceof NotFoundError && err.code === 'workspace_empty' && splitPath(input.path).length === 0) return { path: '', entries: [], truncated: false };
        throw err;
      }
    },

    /** A file of the caller's workspace, as a stream (a regular file with one link, reached through no link). */
    async read(ctx: Ctx, input: { path: string }): Promise<{ name: string; size: number; mtime: Date; stream: Readable }> {
      const owner = ownerOf(ctx);
      splitPath(input.path);
      const where = await whereOf(owner);
      if ('root' in where) return openFile(where.root, input.path);
      const res = await onRunner(where.runnerId, owner, 'read', { path: input.path });
      return {
        name: decodeURIComponent(String(res.headers[FILE_HEADERS.name] ?? 'file')),
        size: Number(res.headers[FILE_HEADERS.size] ?? 0),
        mtime: new Date(String(res.headers[FILE_HEADERS.mtime] ?? 0)),
        stream: held(res),
      };
    },

    /**
     * A folder of the caller's workspace as a tar archive (audited): on this serve, written into the
     * response as the walk reads it (`writeTo`); from a runner host, its stream.
     */
    async archive(ctx: Ctx, input: { path: string }): Promise<{ name: string; stream?: Readable; writeTo?: (out: ArchiveSink) => Promise<unknown>; close?: () => Promise<void> }> {
      const owner = ownerOf(ctx);
      splitPath(input.path);
      const where = await whereOf(owner);
      let out: { name: string; stream?: Readable; writeTo?: (out: ArchiveSink) => Promise<unknown>; close?: () => Promise<void> };
      if ('root' in where) {
        const a = await openArchive(where.root, input.path);
        out = { name: a.name, writeTo: (sink) => a.writeTo(sink), close: () => a.close() };
      } else {
        const res = await onRunner(where.runnerId, owner, 'archive', { path: input.path });
        out = { name: decodeURIComponent(String(res.headers[FILE_HEADERS.name] ?? 'workspace.tar')), stream: held(res) };
      }
      await deps.db.transaction((tx) => deps.audit.record(tx, ctx, { action: 'workspace.archive_downloaded', target: `user:${owner.userId}`, details: { path: input.path || '.' } })).catch((err) => ctx.log.warn({ err: (err as Error).message }, 'could not audit an archive download'));
      return out;
    },

    /**
     * Files uploaded into a directory of the caller's workspace (made if missing), each written whole as a
     * new file (an existing one of the same name is replaced), as the sandbox's user would write it.
     * Refused past AGENTWS_UPLOAD_FILE_MAX a file, AGENTWS_UPLOAD_MAX_FILES a request, or the person's
     * workspace quota (413 naming which); files written before a refusal stay. Audited.
     */
    async upload(ctx: Ctx, input: { dir: string; parts: AsyncIterable<UploadPart> }): Promise<{ files: Array<{ path: string; bytes: number }> }> {
      const owner = ownerOf(ctx);
      requireTokenScope(ctx, 'sessions');
      const dirParts = splitPath(input.dir, 'path');
      const where = await whereOf(owner);
      if ('runnerId' in where && deps.startRuntime) {
        // A person never run on their runner host has no files there, and the host takes none for them yet.
        const probe = await onRunner(where.runnerId, owner, 'list', { path: '' }, { timeoutMs: 30_000 }).then(
          (res) => (res.resume(), null),
          (err: unknown) => err,
        );
        if (probe instanceof NotFoundError && probe.code === 'workspace_empty') await deps.startRuntime(owner);
      }
      const quota = await deps.quotaOf(owner);
      const used = quota === null ? 0 : ((await deps.usedBytes(owner)) ?? 0);
      let room = quota === null ? Number.MAX_SAFE_INTEGER : Math.max(0, quota - used);
      const files: Array<{ path: string; bytes: number }> = [];
      let failure: unknown = null;
      try {
        for await (const part of input.parts) {
          if (failure) {
            part.stream.resume();
            continue;
          }
          try {
            if (files.length >= deps.uploads.maxFiles) throw new PayloadTooLargeError(`more than ${deps.uploads.maxFiles} files in one upload (AGENTWS_UPLOAD_MAX_FILES)`, { code: 'upload_too_many_files', details: { field: 'files', limit: 'AGENTWS_UPLOAD_MAX_FILES', maxFiles: deps.uploads.maxFiles } });
            if (quota !== null && room <= 0) throw quotaFull(quota, used);
            const rel = splitPath(part.name, 'files (a file name)');
            const path = [...dirParts, ...rel].join('/');
            const byQuota = room < deps.uploads.fileMaxBytes;
            const maxBytes = Math.min(room, deps.uploads.fileMaxBytes);
            const limitName = byQuota ? `your workspace quota (${formatSize(quota!)}, ${formatSize(used)} used)` : `AGENTWS_UPLOAD_FILE_MAX (${formatSize(deps.uploads.fileMaxBytes)})`;
            let r: { path: string; bytes: number };
            if ('root' in where) r = await writeFile(where.root, path, part.stream, { maxBytes, limitName });
            else r = (await readJson(await onRunner(where.runnerId, owner, 'write', { path, maxBytes: String(maxBytes), limitName }, { method: 'PUT', body: part.stream, timeoutMs: 0 }))) as { path: string; bytes: number };
            room -= r.bytes;
            files.push(r);
          } catch (err) {
            part.stream.resume();
            // The multipart reader's own bound (a margin past AGENTWS_UPLOAD_FILE_MAX) met first: said as ours.
            failure = (err as { code?: string }).code === 'FST_REQ_FILE_TOO_LARGE'
              ? new PayloadTooLargeError(`${part.name} is larger than AGENTWS_UPLOAD_FILE_MAX (${formatSize(deps.uploads.fileMaxBytes)})`, { code: 'upload_too_large', details: { field: 'files', limit: 'AGENTWS_UPLOAD_FILE_MAX' } })
              : err;
          }
        }
      } finally {
        if (files.length) {
          const bytes = files.reduce((n, f) => n + f.bytes, 0);
          await deps.db
            .transaction((tx) => deps.audit.record(tx, ctx, { action: 'workspace.files_uploaded', target: `user:${owner.userId}`, details: { dir: input.dir || '.', files: files.length, bytes, paths: files.slice(0, 20).map((f) => f.path), ...(failure ? { stoppedBy: (failure as Error).message.slice(0, 200) } : {}) } }))
            .catch((err) => ctx.log.warn({ err: (err as Error).message }, 'could not audit an upload'));
        }
      }
      if (failure) throw failure;
      return { files };
    },
  };
}

function quotaFull(quota: number, used: number): PayloadTooLargeError {
  return new PayloadTooLargeError(`your workspace is at its quota (${formatSize(used)} of ${formatSize(quota)}): nothing more can be uploaded`, { code: 'workspace_quota_exceeded', details: { field: 'files', limit: 'workspace quota', quotaBytes: quota, usedBytes: used } });
}

/**
 * A runner's answer as a plain stream, held until read: a small answer arrives whole and its HTTP/2 stream
 * closes before the caller takes it (a stream already closed reads to the HTTP layer as cut short). One
 * destroyed destroys the other (a client gone stops the runner's side).
 */
function held(res: TunnelResponse): Readable {
  const out = new PassThrough({ highWaterMark: 256 * 1024 });
  pipeline(res, out, () => {});
  return out;
}

/** A small JSON answer of a runner (at most 4 MiB: a listing of MAX_LIST_ENTRIES entries fits). */
async function readJson(res: TunnelResponse): Promise<any> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of res) {
    size += (c as Buffer).length;
    if (size > 4 * 1024 * 1024) {
      res.destroy();
      throw new UnavailableError('the runner host sent an answer too large for a files request', { code: 'runner_answer_too_large' });
    }
    chunks.push(c as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return null;
  }
}

export type WorkspaceFilesService = ReturnType<typeof createWorkspaceFilesService>;
