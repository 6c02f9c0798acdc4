import { MCP_CONNECTOR_PATH_PREFIX, MEMORY_MCP_SERVER } from '../runtime/host/agent-endpoints.js';

/**
 * The rules of MCP connectors, without I/O: what an admin may register, which roles reach
 * which servers and tools, and what crosses the gateway between an agent and a server in each direction.
 * The gateway (mcp-gateway.ts) and the service (mcp-servers.service.ts) apply them.
 */

/** A server's name: its path segment, its key in the runtime's configuration and its tools' prefix. */
export const MCP_SERVER_NAME = /^[a-z][a-z0-9-]{0,39}$/;
/** Names the runtime's configuration already uses for the service's own servers. */
const RESERVED_MCP_SERVER_NAMES: readonly string[] = [MEMORY_MCP_SERVER];
/** A tool name as MCP servers name them (the spec's recommended characters), bounded. */
const MCP_TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
/** A role name as roles are named (rbac); checked loosely: an unknown role simply matches nobody. */
const ROLE_NAME = /^[A-Za-z0-9_.:-]{1,100}$/;
/** How many access entries and tool names one server may have. */
export const MCP_ACCESS_MAX = 100;
export const MCP_TOOLS_MAX = 500;

export const MCP_AUTH_KINDS = ['none', 'bearer', 'header'] as const;
export type McpAuthKind = (typeof MCP_AUTH_KINDS)[number];

/**
 * Which role may use a server: every tool (`*`) or the named ones; and, apart, its resources (`*`, or URI
 * patterns: exact, or a prefix ending in `*`) and prompts (`*`, or names). Resources and prompts left out
 * are none: an entry written before they could be granted keeps meaning tools only.
 */
export interface McpAccessEntry {
  role: string;
  tools: '*' | string[];
  resources?: '*' | string[];
  prompts?: '*' | string[];
}

/** What one user may use of one server's tools or prompts: every one, or these names. */
export type McpToolGrant = '*' | ReadonlySet<string>;
/** What one user may read of one server's resources: every one, or these URI patterns. */
export type McpResourceGrant = '*' | readonly string[];

/** What one user may use of one server (a user with no entry gets null: no access at all). */
export interface McpGrant {
  tools: McpToolGrant;
  resources: McpResourceGrant;
  prompts: McpToolGrant;
}

/** An access entry with every part spelled out (resources and prompts none when left out). */
export function normaliseAccessEntry(e: McpAccessEntry): Required<McpAccessEntry> {
  return { role: e.role, tools: e.tools, resources: e.resources ?? [], prompts: e.prompts ?? [] };
}

/** The server name a gateway-host path names, or null (any other shape: a trailing slash, more segments, escapes). */
export function connectorNameOfPath(pathname: string): string | null {
  if (!pathname.startsWith(MCP_CONNECTOR_PATH_PREFIX)) return null;
  const name = pathname.slice(MCP_CONNECTOR_PATH_PREFIX.length);
  return MCP_SERVER_NAME.test(name) ? name : null;
}

/** Problems with a server name (empty: fine). */
export function serverNameProblems(name: string): string[] {
  if (!MCP_SERVER_NAME.test(name)) return ['name must be lower-case letters, digits and dashes, starting with a letter (at most 40)'];
  if (RESERVED_MCP_SERVER_NAMES.includes(name)) return [`name "${name}" is reserved for the service's own tools`];
  return [];
}

/**
 * The server's URL as stored, or a problem. http(s) only; no user info (a credential belongs in the
 * sealed secret, never in a URL that is listed and logged); no fragment.
 */
export function checkServerUrl(raw: string): { url: string } | { problem: string } {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return { problem: 'url must be an absolute http(s) URL' };
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return { problem: 'url must be an http(s) URL' };
  if (u.username || u.password) return { problem: 'url must not carry credentials: give the token as the secret' };
  if (u.hash) return { problem: 'url must not have a fragment' };
  return { url: u.href };
}

/**
 * Headers a credential may not go in: the ones that frame the request or that the gateway sets itself.
 * Anything else (x-api-key, private-token, ...) is a server's business.
 */
const FORBIDDEN_AUTH_HEADERS = new Set([
  'host', 'content-length', 'content-type', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer', 'expect',
  'accept', 'accept-encoding', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id', 'cookie', 'proxy-authorization', 'origin',
]);
const HEADER_TOKEN = /^[a-z0-9!#$%&'*+.^_`|~-]{1,100}$/;

/** Problems with the header a `header` credential goes in (empty: fine); the name as stored (lower case). */
export function checkAuthHeader(raw: string): { header: string } | { problem: string } {
  const header = raw.trim().toLowerCase();
  if (!HEADER_TOKEN.test(header)) return { problem: 'authHeader must be an HTTP header name (letters, digits and dashes)' };
  if (FORBIDDEN_AUTH_HEADERS.has(header)) return { problem: `authHeader cannot be ${header}: the gateway sets it itself` };
  return { header };
}

/** A secret goes into a header value: it must be one (no line breaks, no control characters). */
export function secretProblems(secret: string): string[] {
  if (!secret.trim()) return ['secret must not be empty'];
  if (secret.length > 8192) return ['secret must be at most 8192 characters'];
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(secret)) return ['secret must not contain line breaks or control characters'];
  return [];
}

/** A resource URI pattern: a URI with a scheme (RFC 3986's), no spaces or controls, `*` only as its last character. */
const RESOURCE_PATTERN = /^[A-Za-z][A-Za-z0-9+.-]*:[^\s*\x00-\x1f\x7f]*\*?$/;
export const MCP_RESOURCES_MAX = 200;

/** Problems with an access list (empty: fine), each naming the entry at fault. */
export function accessProblems(access: readonly McpAccessEntry[]): string[] {
  const problems: string[] = [];
  if (access.length > MCP_ACCESS_MAX) problems.push(`access has at most ${MCP_ACCESS_MAX} entries`);
  const seen = new Set<string>();
  access.forEach((e, i) => {
    if (!ROLE_NAME.test(e.role)) problems.push(`access[${i}].role must be a role name`);
    else if (seen.has(e.role)) problems.push(`access[${i}].role "${e.role}" is listed twice`);
    seen.add(e.role);
    if (e.tools !== '*') {
      if (e.tools.length > MCP_TOOLS_MAX) problems.push(`access[${i}].tools has at most ${MCP_TOOLS_MAX} names`);
      const bad = e.tools.find((t) => !MCP_TOOL_NAME.test(t));
      if (bad !== undefined) problems.push(`access[${i}].tools: "${bad.slice(0, 40)}" is not a tool name`);
    }
    if (e.prompts !== undefined && e.prompts !== '*') {
      if (e.prompts.length > MCP_TOOLS_MAX) problems.push(`access[${i}].prompts has at most ${MCP_TOOLS_MAX} names`);
      const bad = e.prompts.find((t) => !MCP_TOOL_NAME.test(t));
      if (bad !== undefined) problems.push(`access[${i}].prompts: "${bad.slice(0, 40)}" is not a prompt name`);
    }
    if (e.resources !== undefined && e.resources !== '*') {
      if (e.resources.length > MCP_RESOURCES_MAX) problems.push(`access[${i}].resources has at most ${MCP_RESOURCES_MAX} patterns`);
      const bad = e.resources.find((r) => r.length > 2000 || !RESOURCE_PATTERN.test(r));
      if (bad !== undefined) problems.push(`access[${i}].resources: "${bad.slice(0, 60)}" is not a resource URI or a prefix ending in * (e.g. docs://handbook/*)`);
    }
  });
  return problems;
}

const unionOf = (parts: ReadonlyArray<'*' | readonly string[] | undefined>): '*' | string[] =>
  parts.some((p) => p === '*') ? '*' : [...new Set(parts.flatMap((p) => (p ?? []) as readonly string[]))];

/**
 * What a user with these roles may use of one server: for tools, resources and prompts each, the union
 * of their roles' entries (`*` absorbs); null when none of their roles is listed. An entry with nothing
 * grants the server (its lists) but nothing in them.
 */
export function grantFor(access: readonly McpAccessEntry[], roles: readonly string[]): McpGrant | null {
  const mine = access.filter((e) => roles.includes(e.role));
  if (!mine.length) return null;
  const tools = unionOf(mine.map((e) => e.tools));
  const prompts = unionOf(mine.map((e) => e.prompts ?? []));
  return { tools: tools === '*' ? '*' : new Set(tools), resources: unionOf(mine.map((e) => e.resources ?? [])), prompts: prompts === '*' ? '*' : new Set(prompts) };
}

export function toolGranted(grant: McpToolGrant, tool: string): boolean {
  return grant === '*' || grant.has(tool);
}

/**
 * Whether a resource URI is granted: `*`, the very URI, or a pattern's prefix followed by a rest with no
 * way back up (no `.` or `..` segment, raw or percent-encoded, no backslash): `docs://handbook/*` must not
 * reach `docs://handbook/../payroll` on a server that resolves paths.
 */
export function resourceGranted(grant: McpResourceGrant, uri: string): boolean {
  if (grant === '*') return true;
  return grant.some((p) => {
    if (!p.endsWith('*')) return p === uri;
    const prefix = p.slice(0, -1);
    if (!uri.startsWith(prefix)) return false;
    const rest = uri.slice(prefix.length);
    return !/\\|%2e|%2f|%5c/i.test(rest) && !`/${rest}/`.split(/[/?#]/).some((seg) => seg === '.' || seg === '..');
  });
}

/**
 * Request headers passed on to the server: an allow-list of what the transport needs. Everything else the
 * agent sends (its Authorization, cookies, forwarding headers, anything it made up) stays behind; the
 * credential header is added after, so nothing the agent sends can replace it.
 */
const FORWARDED_REQUEST_HEADERS = ['accept', 'content-type', 'mcp-protocol-version', 'mcp-session-id', 'last-event-id'] as const;

export function forwardedRequestHeaders(incoming: Record<string, string | string[] | undefined>, credential: { header: string; value: string } | null): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of FORWARDED_REQUEST_HEADERS) {
    const v = incoming[h];
    if (typeof v === 'string' && v.length <= 1024) out[h] = v;
  }
  if (credential) out[credential.header] = credential.value;
  return out;
}

/**
 * Response headers passed back to the agent: the answer's type and the protocol's session id, nothing
 * else (no cookies, no WWW-Authenticate inviting an OAuth dance, no headers echoing the credential).
 */
export function returnedResponseHeaders(incoming: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of ['content-type', 'mcp-session-id'] as const) {
    const v = incoming[h];
    if (typeof v === 'string' && v.length <= 1024 && !/[\r\n]/.test(v)) out[h] = v;
  }
  return out;
}

/** A JSON-RPC message as far as the gateway looks into it. */
interface RpcMessage {
  jsonrpc?: unknown;
  id?: unknown;
  method?: unknown;
  params?: unknown;
  result?: unknown;
  error?: unknown;
}

/**
 * The JSON-RPC methods the gateway forwards, spelled exactly as MCP spells them; anything else (another
 * spelling such as `Tools/Call` or `tools/call `, a method of a later revision, a server's own extension)
 * is answered by the gateway, never forwarded: a server matching names loosely would otherwise run a
 * call the gateway never checked. Requests need an id; notifications have none. Not forwarded on
 * purpose: resources/subscribe and unsubscribe (their updates would come on a server-to-client stream,
 * which the gateway does not open), logging/setLevel, and answers to server requests (the gateway passes
 * none on, so there is nothing to answer).
 */
const MCP_FORWARDED_REQUESTS = ['initialize', 'ping', 'tools/list', 'tools/call', 'resources/list', 'resources/templates/list', 'resources/read', 'prompts/list', 'prompts/get', 'completion/complete'] as const;
const MCP_FORWARDED_NOTIFICATIONS = ['notifications/initialized', 'notifications/cancelled', 'notifications/progress', 'notifications/roots/list_changed'] as const;

/** What the gateway needs to know of a request before forwarding it. */
export type ClassifiedRequest =
  | { kind: 'tool_call'; id: string | number; tool: string; args: Record<string, unknown> }
  | { kind: 'tools_list'; id: string | number }
  | { kind: 'resources_list'; id: string | number }
  | { kind: 'resource_templates_list'; id: string | number }
  | { kind: 'resource_read'; id: string | number; uri: string }
  | { kind: 'prompts_list'; id: string | number }
  | { kind: 'prompt_get'; id: string | number; prompt: string }
  /** completion/complete for a prompt's argument or a resource template's: granted as that prompt or template is. */
  | { kind: 'completion'; id: string | number; ref: { type: 'prompt'; name: string } | { type: 'resource'; uri: string } }
  /** initialize, ping and the client's notifications: no grant of their own (the server's is checked for every request). */
  | { kind: 'other'; id: string | number | null; method: string }
  /** A method the gateway does not forward: answered with a JSON-RPC error (a request) or refused (a notification). */
  | { kind: 'unknown_method'; id: string | number | null; method: string }
  | { kind: 'invalid'; problem: string };

const isId = (id: unknown): id is string | number => typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id));
const REQUESTS: ReadonlySet<string> = new Set(MCP_FORWARDED_REQUESTS);
const NOTIFICATIONS: ReadonlySet<string> = new Set(MCP_FORWARDED_NOTIFICATIONS);

/**
 * Classifies one POSTed body. Batches are refused: a batch could hide a tools/call among other messages
 * (the spec's 2025-06-18 revision dropped them anyway).
 */
export function classifyRequest(body: unknown): ClassifiedRequest {
  if (Array.isArray(body)) return { kind: 'invalid', problem: 'batches are not supported: send one message per request' };
  if (!body || typeof body !== 'object') return { kind: 'invalid', problem: 'not a JSON-RPC message' };
  const m = body as RpcMessage;
  if (m.jsonrpc !== '2.0') return { kind: 'invalid', problem: 'jsonrpc must be "2.0"' };
  if (m.method === undefined) return { kind: 'invalid', problem: 'the gateway passes no server requests on, so there is nothing to answer: send requests and notifications only' };
  if (typeof m.method !== 'string') return { kind: 'invalid', problem: 'method must be a string' };
  const method = m.method;
  const id = isId(m.id) ? m.id : null;
  if (m.id !== undefined && id === null) return { kind: 'invalid', problem: 'id must be a string or a number' };
  if (NOTIFICATIONS.has(method)) return id === null ? { kind: 'other', id: null, method } : { kind: 'unknown_method', id, method };
  if (!REQUESTS.has(method)) return { kind: 'unknown_method', id, method };
  if (id === null) return { kind: 'invalid', problem: `${method} needs an id` };
  const params = (m.params && typeof m.params === 'object' && !Array.isArray(m.params) ? m.params : {}) as Record<string, unknown>;
  switch (method) {
    case 'tools/call': {
      if (typeof params.name !== 'string') return { kind: 'invalid', problem: 'params.name must be the tool name' };
      const args = params.arguments && typeof params.arguments === 'object' && !Array.isArray(params.arguments) ? (params.arguments as Record<string, unknown>) : {};
      return { kind: 'tool_call', id, tool: params.name, args };
    }
    case 'tools/list':
      return { kind: 'tools_list', id };
    case 'resources/list':
      return { kind: 'resources_list', id };
    case 'resources/templates/list':
      return { kind: 'resource_templates_list', id };
    case 'resources/read':
      if (typeof params.uri !== 'string') return { kind: 'invalid', problem: 'params.uri must be the resource URI' };
      return { kind: 'resource_read', id, uri: params.uri };
    case 'prompts/list':
      return { kind: 'prompts_list', id };
    case 'prompts/get':
      if (typeof params.name !== 'string') return { kind: 'invalid', problem: 'params.name must be the prompt name' };
      return { kind: 'prompt_get', id, prompt: params.name };
    case 'completion/complete': {
      const ref = (params.ref && typeof params.ref === 'object' ? params.ref : {}) as { type?: unknown; name?: unknown; uri?: unknown };
      if (ref.type === 'ref/prompt' && typeof ref.name === 'string') return { kind: 'completion', id, ref: { type: 'prompt', name: ref.name } };
      if (ref.type === 'ref/resource' && typeof ref.uri === 'string') return { kind: 'completion', id, ref: { type: 'resource', uri: ref.uri } };
      return { kind: 'invalid', problem: 'params.ref must be {type: "ref/prompt", name} or {type: "ref/resource", uri}' };
    }
    default:
      return { kind: 'other', id, method };
  }
}

/** Why the grant refuses a request before it is forwarded (null: it may go). */
export function refusalOf(request: ClassifiedRequest, grant: McpGrant, server: string): string | null {
  switch (request.kind) {
    case 'tool_call':
      return toolGranted(grant.tools, request.tool) ? null : `the tool "${request.tool.slice(0, 128)}" of the MCP server "${server}" is not allowed for your roles`;
    case 'resource_read':
      return resourceGranted(grant.resources, request.uri) ? null : `the resource "${request.uri.slice(0, 200)}" of the MCP server "${server}" is not allowed for your roles`;
    case 'prompt_get':
      return toolGranted(grant.prompts, request.prompt) ? null : `the prompt "${request.prompt.slice(0, 128)}" of the MCP server "${server}" is not allowed for your roles`;
    case 'completion':
      return request.ref.type === 'prompt'
        ? toolGranted(grant.prompts, request.ref.name) ? null : `the prompt "${request.ref.name.slice(0, 128)}" of the MCP server "${server}" is not allowed for your roles`
        : resourceGranted(grant.resources, request.ref.uri) ? null : `the resource "${request.ref.uri.slice(0, 200)}" of the MCP server "${server}" is not allowed for your roles`;
    default:
      return null;
  }
}

/** Keeps the items of a listed array the grant allows (by one field of each item). */
function kept(items: unknown[], allowed: (key: string) => boolean, field: string): unknown[] {
  return items.filter((t) => t && typeof t === 'object' && typeof (t as Record<string, unknown>)[field] === 'string' && allowed((t as Record<string, string>)[field]));
}

/**
 * One message of the server's answer as the agent may see it, or null to drop it. Passed: responses to
 * the request (a list cut to what the grant allows: tools and prompts by name, resources by URI, resource
 * templates by their URI template against the same patterns; a resource read cut to the granted URIs,
 * should the server answer with others) and notifications (progress, logs). Dropped: requests from the
 * server (sampling, elicitation, roots): through the gateway a server may answer, never make the agent's
 * runtime act for it.
 */
export function screenAnswer(message: unknown, request: ClassifiedRequest, grant: McpGrant): unknown | null {
  if (!message || typeof message !== 'object' || Array.isArray(message)) return null;
  const m = message as RpcMessage;
  if (m.method !== undefined) return m.id === undefined ? message : null;
  if (!m.result || typeof m.result !== 'object') return message;
  const result = m.result as Record<string, unknown>;
  const cut = (field: string, allowed: (key: string) => boolean, key: string) =>
    Array.isArray(result[field]) ? { ...m, result: { ...result, [field]: kept(result[field] as unknown[], allowed, key) } } : message;
  switch (request.kind) {
    case 'tools_list':
      return grant.tools === '*' ? message : cut('tools', (n) => toolGranted(grant.tools, n), 'name');
    case 'prompts_list':
      return grant.prompts === '*' ? message : cut('prompts', (n) => toolGranted(grant.prompts, n), 'name');
    case 'resources_list':
      return grant.resources === '*' ? message : cut('resources', (u) => resourceGranted(grant.resources, u), 'uri');
    case 'resource_templates_list':
      return grant.resources === '*' ? message : cut('resourceTemplates', (u) => resourceGranted(grant.resources, u), 'uriTemplate');
    case 'resource_read':
      return grant.resources === '*' ? message : cut('contents', (u) => resourceGranted(grant.resources, u), 'uri');
    default:
      return message;
  }
}

/** How a tool call ended, read from the server's response: a protocol error, a tool error, or a result. */
export function toolCallOutcome(message: unknown): { ok: boolean; error?: string } | null {
  if (!message || typeof message !== 'object') return null;
  const m = message as RpcMessage;
  if (m.method !== undefined) return null;
  if (m.error && typeof m.error === 'object') return { ok: false, error: String((m.error as { message?: unknown }).message ?? 'error').slice(0, 200) };
  if (m.result && typeof m.result === 'object') return (m.result as { isError?: unknown }).isError === true ? { ok: false, error: 'the tool reported an error' } : { ok: true };
  return null;
}

/**
 * Splits a text/event-stream into events as it arrives: `push` returns the complete events so far (each
 * its `data` lines joined, and the other fields as they came); the remainder waits for more. The limit
 * bounds one event: a server cannot make the gateway hold an endless one.
 */
export function createSseSplitter(maxEventBytes: number) {
  let pending = '';
  return {
    push(chunk: string): Array<{ fields: string[]; data: string | null }> {
      pending += chunk;
      const events: Array<{ fields: string[]; data: string | null }> = [];
      for (;;) {
        const m = /\r?\n\r?\n/.exec(pending);
        if (!m) break;
        const block = pending.slice(0, m.index);
        pending = pending.slice(m.index + m[0].length);
        const fields: string[] = [];
        const data: string[] = [];
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
          else if (line.startsWith('id:') || line.startsWith('event:') || line.startsWith('retry:')) fields.push(line);
        }
        events.push({ fields, data: data.length ? data.join('\n') : null });
      }
      if (pending.length > maxEventBytes) throw new Error(`an event of the server's stream exceeds ${maxEventBytes} bytes`);
      return events;
    },
  };
}

/** One event written back to the agent: its id/event fields and the (screened) message as one data line. */
export function sseEvent(fields: readonly string[], message: unknown | null): string {
  const lines = fields.filter((f) => !/[\r\n]/.test(f));
  if (message !== null) lines.push(`data: ${JSON.stringify(message)}`);
  return lines.length ? `${lines.join('\n')}\n\n` : '';
}
