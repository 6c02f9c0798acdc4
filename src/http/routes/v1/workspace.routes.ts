import multipart from '@fastify/multipart';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Core } from '../../../core/create-core.js';
import { contentTypeOf, servedInline } from '../../../core/runtime/host/workspace-files.js';
import type { UploadPart } from '../../../core/workspace/workspace-files.service.js';
import { ValidationError } from '../../../kernel/errors.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

const PathQuery = Type.Object({
  path: Type.String({ default: '', maxLength: 4096, description: 'Relative to your workspace ("" or omitted: its top); no "..", no leading "/", no NUL' }),
});
export const Entry = Type.Object({
  name: Type.String(),
  type: Type.Union([Type.Literal('file'), Type.Literal('directory'), Type.Literal('symlink'), Type.Literal('other')], { description: 'symlink: shown with its target, never followed; other: a device, socket or pipe (never read)' }),
  size: Type.Number(),
  mtime: DateTime,
  target: Type.Optional(Type.String({ description: 'A symlink\'s target as written' })),
  links: Type.Optional(Type.Integer({ description: 'A file with more than one hard link (not read: its other name may be outside the workspace)' })),
});
const Listing = Type.Object({ path: Type.String(), entries: Type.Array(Entry), truncated: Type.Boolean({ description: 'More entries than are listed (5,000)' }) });
const Bytes = Type.Unsafe<unknown>({ type: 'string', format: 'binary', description: 'The bytes, streamed' });
const Uploaded = Type.Object({ files: Type.Array(Type.Object({ path: Type.String(), bytes: Type.Integer() })) });
/**
 * The multipart form, for the API document: the multipart parser leaves the body empty (null passes here)
 * and each file is checked as it streams in (its name as a path, its size against the limits).
 */
const MultipartUpload = Type.Unsafe<null>({
  type: 'object',
  nullable: true,
  properties: {
    files: Type.Array(Type.String({ format: 'binary' }), { description: 'Repeatable (also files[]); each file name is its path under the target folder, e.g. "photos/2026/a.jpg"' }),
  },
});
const errs = (...s: number[]) => errorResponses(400, 401, 403, 404, 422, 503, ...s);

/**
 * Every answer with bytes the agent wrote: never sniffed, never run. A CSP of `sandbox` makes a document
 * opened from it an opaque origin with no script; anything but plain text, raster images and PDF is an
 * attachment (HTML and SVG are never shown in place).
 */
function fileHeaders(name: string, o: { type: string; download: boolean }): Record<string, string> {
  const inline = !o.download && servedInline(o.type);
  // Chromium's PDF viewer does not open in a sandboxed document: a PDF (served as one, never sniffed as a
  // page) gets a policy with no script or connection instead.
  const csp = inline && o.type === 'application/pdf' ? "default-src 'none'; object-src 'self'; img-src 'self' data:; style-src 'unsafe-inline'" : "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'";
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return {
    'content-type': o.type,
    'x-content-type-options': 'nosniff',
    'content-security-policy': csp,
    'cross-origin-resource-policy': 'same-origin',
    'cache-control': 'private, no-store',
    'content-disposition': `${inline ? 'inline' : 'attachment'}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`,
  };
}

/** A person's own workspace files (docs/using/workspace.md, "Files"): browse, read, download a folder, upload. */
export async function workspaceRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { workspaceFiles, config } = opts.core;
  // Multipart here keeps the client's relative paths (a folder pick sends "folder/sub/a.txt");
  // each file is streamed to the host as it arrives, its size held by the service.
  await app.register(multipart, { preservePath: true, limits: { fileSize: config.uploads.fileMaxBytes + 1024 * 1024, files: config.uploads.maxFiles + 1, fields: 10, fieldSize: 4096, parts: config.uploads.maxFiles + 10 } });

  app.get(
    '/workspace/files',
    { schema: { tags: ['workspace'], summary: 'The entries of a directory of your workspace (links shown, never followed)', querystring: PathQuery, response: { 200: Listing, ...errs() } } },
    async (req) => workspaceFiles.list(ctxOf(req), { path: req.query.path ?? '' }),
  );

  app.get(
    '/workspace/file',
    {
      schema: {
        tags: ['workspace'],
        summary: 'A file of your workspace, streamed (download=1: as an attachment)',
        querystring: Type.Object({ ...PathQuery.properties, download: Type.Optional(Type.Union([Type.Literal('1'), Type.Literal('0'), Type.Literal('true'), Type.Literal('false')])) }),
        response: { 200: Bytes, ...errs() },
      },
    },
    async (req, reply) => {
      const f = await workspaceFiles.read(ctxOf(req), { path: req.query.path ?? '' });
      const download = req.query.download === '1' || req.query.download === 'true';
      void reply.headers({ ...fileHeaders(f.name, { type: contentTypeOf(f.name), download }), 'content-length': String(f.size), 'last-modified': f.mtime.toUTCString() });
      return reply.send(f.stream);
    },
  );

  app.get(
    '/workspace/archive',
    { schema: { tags: ['workspace'], summary: 'A folder of your workspace as a tar archive, streamed (links stored as links, never followed)', querystring: PathQuery, response: { 200: Bytes, ...errs() } } },
    async (req, reply) => {
      const a = await workspaceFiles.archive(ctxOf(req), { path: req.query.path ?? '' });
      const headers = fileHeaders(a.name, { type: 'application/x-tar', download: true });
      if (a.stream) return reply.headers(headers).send(a.stream);
      // A HEAD asks for the headers only: the walk is not made for nothing.
      if (req.method === 'HEAD') {
        await a.close?.();
        return reply.headers(headers).send();
      }
      // Written straight into the response, chunk by chunk as the socket takes them (openArchive).
      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, { ...headers, 'x-request-id': req.id });
      await a.writeTo!(raw).then(
        () => raw.end(),
        (err: Error) => {
          req.log.warn({ err: err.message }, 'an archive download ended early');
          raw.destroy();
        },
      );
      return reply;
    },
  );

  app.post(
    '/workspace/files',
    {
      schema: {
        tags: ['workspace'],
        summary: 'Upload files (and folders: relative paths as the file names) into a directory of your workspace (multipart/form-data, field files)',
        querystring: PathQuery,
        body: { content: { 'multipart/form-data': { schema: MultipartUpload } } },
        response: { 200: Uploaded, ...errs(409, 413) },
      },
    },
    async (req) => {
      if (!req.isMultipart()) throw new ValidationError('send multipart/form-data with the files under the field "files"', { details: { field: 'files' } });
      return workspaceFiles.upload(ctxOf(req), { dir: req.query.path ?? '', parts: fileParts(req) });
    },
  );
}

/** The request's files as the service takes them, one at a time as they arrive. */
async function* fileParts(req: FastifyRequest): AsyncGenerator<UploadPart> {
  for await (const part of req.parts()) {
    if (part.type !== 'file') continue;
    if (part.fieldname !== 'files' && part.fieldname !== 'files[]') {
      part.file.resume();
      throw new ValidationError('files go under the field "files"', { details: { field: 'files' } });
    }
    yield { name: part.filename, stream: part.file };
  }
}
