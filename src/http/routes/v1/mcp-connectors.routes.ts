import { Type } from '@sinclair/typebox';
import { McpServer, McpServerInput, McpServerPatch } from '../../../core/connectors/mcp-servers.schemas.js';
import type { Core } from '../../../core/create-core.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { errorResponses } from '../../schemas.js';

const Name = Type.Object({ name: Type.String({ maxLength: 40 }) });

/**
 * MCP connectors: the tenant's remote MCP servers, their sealed credentials and which roles
 * may use which tools (admin.manage_providers). Secrets go in and never come out.
 */
export async function mcpConnectorsRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { mcpServers } = opts.core;
  const errs = (...s: number[]) => errorResponses(400, 401, 403, ...s);
  const tags = ['connectors'];

  app.get('/admin/connectors/mcp', { schema: { tags, summary: "The tenant's MCP servers (secrets never returned)", response: { 200: Type.Object({ servers: Type.Array(McpServer) }), ...errs() } } }, async (req) => ({
    servers: await mcpServers.list(ctxOf(req)),
  }));

  app.get('/admin/connectors/mcp/:name', { schema: { tags, summary: 'One MCP server', params: Name, response: { 200: Type.Object({ server: McpServer }), ...errs(404) } } }, async (req) => ({
    server: await mcpServers.get(ctxOf(req), req.params.name),
  }));

  app.post(
    '/admin/connectors/mcp',
    { schema: { tags, summary: 'Register an MCP server (Streamable HTTP) with its credential (stored sealed) and the roles that may use it', body: McpServerInput, response: { 201: Type.Object({ server: McpServer }), ...errs(409) } } },
    async (req, reply) => reply.status(201).send({ server: await mcpServers.create(ctxOf(req), req.body) }),
  );

  app.patch(
    '/admin/connectors/mcp/:name',
    { schema: { tags, summary: 'Change an MCP server (URL, credential, access, enabled)', params: Name, body: McpServerPatch, response: { 200: Type.Object({ server: McpServer }), ...errs(404) } } },
    async (req) => ({ server: await mcpServers.update(ctxOf(req), req.params.name, req.body) }),
  );

  app.delete('/admin/connectors/mcp/:name', { schema: { tags, summary: 'Remove an MCP server and its credential', params: Name, response: { 204: Type.Null(), ...errs(404) } } }, async (req, reply) => {
    await mcpServers.remove(ctxOf(req), req.params.name);
    return reply.status(204).send(null);
  });
}
