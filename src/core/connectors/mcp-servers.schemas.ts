import { Type, type Static } from '@sinclair/typebox';
import { MCP_ACCESS_MAX, MCP_AUTH_KINDS, MCP_RESOURCES_MAX, MCP_SERVER_NAME, MCP_TOOLS_MAX } from './mcp-fns.js';

/** Which role may use the server: which of its tools ("*": all), and apart, its resources and prompts (none unless given). */
const McpAccess = Type.Object(
  {
    role: Type.String({ minLength: 1, maxLength: 100, description: 'A role name of the tenant (owner, admin, member, or a custom role)' }),
    tools: Type.Union([Type.Literal('*'), Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { maxItems: MCP_TOOLS_MAX })], {
      description: '"*" for every tool of the server, or the tool names (as the server names them) the role may call',
    }),
    resources: Type.Optional(
      Type.Union([Type.Literal('*'), Type.Array(Type.String({ minLength: 1, maxLength: 2000 }), { maxItems: MCP_RESOURCES_MAX })], {
        description: '"*" for every resource of the server, or URIs the role may read (exact, or a prefix ending in *, e.g. docs://handbook/*). Default: none (resources/list shows none, resources/read is refused)',
      }),
    ),
    prompts: Type.Optional(
      Type.Union([Type.Literal('*'), Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { maxItems: MCP_TOOLS_MAX })], {
        description: '"*" for every prompt of the server, or the prompt names the role may get. Default: none',
      }),
    ),
  },
  { additionalProperties: false },
);

const AuthKind = Type.Union(MCP_AUTH_KINDS.map((k) => Type.Literal(k)), {
  description: 'none; bearer: Authorization: Bearer <secret>; header: <authHeader>: <secret>. Default: bearer when a secret is given, else none',
});
const Secret = Type.String({ minLength: 1, maxLength: 8192, description: 'The token or header value; stored sealed, never returned, never given to a runtime' });

export const McpServerInput = Type.Object(
  {
    name: Type.String({ pattern: MCP_SERVER_NAME.source, description: 'Lower-case name, unique in the tenant; the agent sees its tools as <name>_<tool>' }),
    url: Type.String({ minLength: 1, maxLength: 2000, description: "The server's Streamable HTTP endpoint (http or https)" }),
    authKind: Type.Optional(AuthKind),
    authHeader: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'The header the secret goes in (authKind header), e.g. x-api-key' })),
    secret: Type.Optional(Secret),
    access: Type.Optional(Type.Array(McpAccess, { maxItems: MCP_ACCESS_MAX, description: 'Roles that may use the server (default: none, the server is registered but unused)' })),
    enabled: Type.Optional(Type.Boolean({ default: true })),
  },
  { additionalProperties: false },
);
export type McpServerInput = Static<typeof McpServerInput>;

export const McpServerPatch = Type.Object(
  {
    url: Type.Optional(McpServerInput.properties.url),
    authKind: Type.Optional(AuthKind),
    authHeader: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    secret: Type.Optional(Type.Union([Secret, Type.Null()], { description: 'A new secret, or null to drop the stored one (authKind becomes none). Required when url moves to another origin while a secret is stored' })),
    access: Type.Optional(McpServerInput.properties.access),
    enabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type McpServerPatch = Static<typeof McpServerPatch>;

/** A server as the API shows it: never the secret. */
export const McpServer = Type.Object({
  name: Type.String(),
  url: Type.String(),
  authKind: Type.String(),
  authHeader: Type.Union([Type.String(), Type.Null()]),
  hasSecret: Type.Boolean({ description: 'Whether a secret is stored (it is never returned)' }),
  access: Type.Array(McpAccess),
  enabled: Type.Boolean(),
  gatewayPath: Type.String({ description: 'Where runtimes reach it on the gateway host' }),
  createdAt: Type.Unsafe<Date | string>({ type: 'string', format: 'date-time' }),
  updatedAt: Type.Unsafe<Date | string>({ type: 'string', format: 'date-time' }),
});
