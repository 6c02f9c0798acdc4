import { createReadStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Core } from '../../../core/create-core.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { errorResponses } from '../../schemas.js';
import { readFileSync } from 'node:fs';
import { packageRoot } from '../../../lib/package-root.js';

const Uuid = Type.String({ format: 'uuid' });
const VERSION = (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
const Archive = Type.Unsafe<Buffer>({ type: 'string', format: 'binary', description: "A gzip'd tar: the files docs/admin/audit-and-data.md (\"A person's data: export and erasure\") lists, and manifest.json" });

const ErasureCounts = Type.Object({
  pseudonym: Type.String({ description: 'erased:<12 hex>: how the audit log and usage name the person from now on' }),
  policy: Type.Union([Type.Literal('remove'), Type.Literal('keep-anonymous')], { description: "The tenant's settings.privacy.sharedMemoriesOnErase applied" }),
  sessions: Type.Integer(),
  privateMemories: Type.Integer(),
  sharedMemoriesRemoved: Type.Integer(),
  sharedMemoriesKept: Type.Integer(),
  trajectories: Type.Integer(),
  gitConnections: Type.Integer(),
  usageRecordsPseudonymised: Type.Integer(),
  auditEntriesPseudonymised: Type.Integer(),
  filesRemoved: Type.Object({ workspace: Type.Boolean(), runtimeHome: Type.Boolean() }),
});

/** A person's data on request: their export as an archive, and their erasure. */
export async function privacyRoutes(app: App, { core }: { core: Core }) {
  const { privacy } = core;

  /** Writes the export to a private temporary file, streams it, and removes it once sent. */
  async function sendExport(req: FastifyRequest, reply: FastifyReply, userId: string): Promise<void> {
    const dir = mkdtempSync(join(tmpdir(), 'agentws-export-'));
    const file = join(dir, 'export.tar.gz');
    try {
      const r = await privacy.exportPerson(ctxOf(req), { user: userId, file, appVersion: VERSION });
      reply.header('content-disposition', `attachment; filename="person-${r.userId}.tar.gz"`);
      reply.type('application/gzip');
      reply.send(createReadStream(file));
      // Resolves once the response is sent: the file is removed only then.
      await reply;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  app.post(
    '/admin/users/:userId/export',
    {
      schema: {
        tags: ['admin'],
        summary: "Everything the appliance holds about a person, as one archive (admin.manage_users); audited user.export",
        description: "Profile, roles, teams, sessions with their transcripts (from the person's runtime, started if need be), memories they wrote, trajectories and the skills learnt from them, git connections (never tokens), usage records and the audit entries about them. manifest.json says what each file is, with counts and checksums, and warns of what could not be read.",
        params: Type.Object({ userId: Uuid }),
        response: { 200: Archive, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (req, reply) => {
      await sendExport(req, reply, req.params.userId);
    },
  );

  app.get(
    '/me/export',
    {
      schema: {
        tags: ['auth'],
        summary: "Everything the appliance holds about the caller, as one archive (the same as an admin's export of them); audited user.export",
        response: { 200: Archive, ...errorResponses(401, 403) },
      },
    },
    async (req, reply) => {
      const ctx = ctxOf(req);
      // Not a user (anonymous, or the API key's operator acting on a tenant): the service refuses it.
      await sendExport(req, reply, ctx.actor.kind === 'user' ? ctx.actor.userId : '');
    },
  );

  app.post(
    '/admin/users/:userId/erase',
    {
      schema: {
        tags: ['admin'],
        summary: "Erase a person (admin.manage_users): runtime stopped, workspace and runtime home removed, sessions, transcripts, private memories, trajectories, git connections, roles and sign-ins removed; usage and audit entries kept under a pseudonym",
        description:
          "Their team and org memories go by the tenant's settings.privacy.sharedMemoriesOnErase (remove, the default, or keep-anonymous). Refused (409) for yourself, the operator user, a gateway's service user and the last owner; only owners erase owners (403). Audited user.erase under the pseudonym.",
        params: Type.Object({ userId: Uuid }),
        response: { 200: Type.Object({ erased: ErasureCounts }), ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (req) => ({ erased: await privacy.erasePerson(ctxOf(req), { userId: req.params.userId }) }),
  );
}
