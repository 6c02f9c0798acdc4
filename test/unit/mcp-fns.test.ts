import { describe, expect, it } from 'vitest';
import {
  accessProblems,
  checkAuthHeader,
  checkServerUrl,
  classifyRequest,
  connectorNameOfPath,
  createSseSplitter,
  forwardedRequestHeaders,
  grantFor,
  normaliseAccessEntry,
  refusalOf,
  resourceGranted,
  returnedResponseHeaders,
  screenAnswer,
  secretProblems,
  serverNameProblems,
  sseEvent,
  toolCallOutcome,
  toolGranted,
} from '../../src/core/connectors/mcp-fns.js';

describe('MCP connectors: the rules (mcp-fns)', () => {
  it('a gateway path names exactly one server, nothing else gets through', () => {
    expect(connectorNameOfPath('/mcp/connectors/tracker')).toBe('tracker');
    expect(connectorNameOfPath('/mcp/connectors/my-wiki2')).toBe('my-wiki2');
    for (const p of ['/mcp/connectors/', '/mcp/connectors/tracker/', '/mcp/connectors/tracker/x', '/mcp/connectors/../memory', '/mcp/connectors/%2e%2e', '/mcp/connectors/Tracker', '/mcp/memory', '/mcp/connectors/a?b', '/mcp/connectorsx/a']) {
      expect(connectorNameOfPath(p), p).toBeNull();
    }
  });

  it('names, URLs, headers and secrets are checked, each problem naming its field', () => {
    expect(serverNameProblems('tracker')).toEqual([]);
    expect(serverNameProblems('memory')[0]).toMatch(/reserved/);
    expect(serverNameProblems('Bad_Name')[0]).toMatch(/^name must/);
    expect(checkServerUrl('https://mcp.example.com/mcp')).toEqual({ url: 'https://mcp.example.com/mcp' });
    expect(checkServerUrl('http://127.0.0.1:8080/mcp?x=1')).toEqual({ url: 'http://127.0.0.1:8080/mcp?x=1' });
    expect(checkServerUrl('ftp://x/y')).toEqual({ problem: expect.stringMatching(/^url must be an http/) });
    expect(checkServerUrl('https://user:pw@x/mcp')).toEqual({ problem: expect.stringMatching(/credentials/) });
    expect(checkServerUrl('nope')).toEqual({ problem: expect.stringMatching(/^url must be an absolute/) });
    expect(checkServerUrl('https://x/mcp#frag')).toEqual({ problem: expect.stringMatching(/fragment/) });
    expect(checkAuthHeader('X-Api-Key')).toEqual({ header: 'x-api-key' });
    for (const h of ['host', 'Content-Length', 'cookie', 'mcp-session-id']) expect(checkAuthHeader(h)).toEqual({ problem: expect.stringMatching(/gateway sets it/) });
    expect(checkAuthHeader('bad header')).toEqual({ problem: expect.stringMatching(/^authHeader must/) });
    expect(secretProblems('tok')).toEqual([]);
    expect(secretProblems('a\r\nx-evil: 1')[0]).toMatch(/line breaks/);
    expect(secretProblems('  ')[0]).toMatch(/empty/);
  });

  it('access lists: roles once each, tool names well formed', () => {
    expect(accessProblems([{ role: 'member', tools: '*' }, { role: 'admin', tools: ['search', 'get_issue'] }])).toEqual([]);
    expect(accessProblems([{ role: 'member', tools: '*' }, { role: 'member', tools: [] }])).toEqual(['access[1].role "member" is listed twice']);
    expect(accessProblems([{ role: 'a b', tools: ['x y'] }])).toEqual(['access[0].role must be a role name', 'access[0].tools: "x y" is not a tool name']);
  });

  it("a user's grant is the union of their roles' entries; no listed role, no server", () => {
    const access = [
      { role: 'member', tools: ['search'] },
      { role: 'reviewer', tools: ['get_issue', 'search'] },
      { role: 'admin', tools: '*' as const },
    ];
    expect(grantFor(access, ['viewer'])).toBeNull();
    expect(grantFor(access, [])).toBeNull();
    const member = grantFor(access, ['member', 'reviewer'])!.tools;
    expect(member).not.toBe('*');
    expect([...(member as Set<string>)].sort()).toEqual(['get_issue', 'search']);
    expect(grantFor(access, ['member', 'admin'])!.tools).toBe('*');
    expect(toolGranted(member, 'search')).toBe(true);
    expect(toolGranted(member, 'delete_everything')).toBe(false);
    expect(toolGranted('*', 'anything')).toBe(true);
    // Listed with no tools: the server, but none of its tools.
    const none = grantFor([{ role: 'member', tools: [] }], ['member'])!;
    expect(toolGranted(none.tools, 'search')).toBe(false);
  });

  it('resources and prompts are granted apart from tools, and none unless given (entries written before keep meaning tools only)', () => {
    // An entry as stored before resources and prompts could be granted: every tool, no resource, no prompt.
    const old = grantFor([{ role: 'member', tools: '*' }], ['member'])!;
    expect(old.tools).toBe('*');
    expect(old.resources).toEqual([]);
    expect([...(old.prompts as Set<string>)]).toEqual([]);
    expect(resourceGranted(old.resources, 'docs://handbook/a')).toBe(false);
    expect(toolGranted(old.prompts, 'triage')).toBe(false);
    const g = grantFor(
      [
        { role: 'member', tools: ['lookup'], resources: ['docs://handbook/*', 'tickets://T-1'], prompts: ['triage'] },
        { role: 'reviewer', tools: [], prompts: '*' },
      ],
      ['member', 'reviewer'],
    )!;
    expect(g.prompts).toBe('*');
    expect(resourceGranted(g.resources, 'docs://handbook/onboarding')).toBe(true);
    expect(resourceGranted(g.resources, 'docs://handbook/a/b?x=1')).toBe(true);
    expect(resourceGranted(g.resources, 'tickets://T-1')).toBe(true);
    expect(resourceGranted(g.resources, 'tickets://T-12')).toBe(false);
    expect(resourceGranted(g.resources, 'docs://payroll/2025')).toBe(false);
    // No way back up out of a prefix, however spelled.
    for (const uri of ['docs://handbook/../payroll', 'docs://handbook/a/../../payroll', 'docs://handbook/%2e%2e/payroll', 'docs://handbook/..%2fpayroll', 'docs://handbook/.', 'docs://handbook/a\\..\\b', 'DOCS://handbook/a']) {
      expect(resourceGranted(g.resources, uri), uri).toBe(false);
    }
    expect(resourceGranted('*', 'anything://x')).toBe(true);
    expect(normaliseAccessEntry({ role: 'member', tools: '*' })).toEqual({ role: 'member', tools: '*', resources: [], prompts: [] });
    expect(accessProblems([{ role: 'member', tools: [], resources: ['docs://a/*', 'file:///x'], prompts: ['triage'] }])).toEqual([]);
    expect(accessProblems([{ role: 'member', tools: [], resources: ['no scheme', 'docs://a*b', 'x://a b'], prompts: ['bad name'] }])).toEqual([
      'access[0].prompts: "bad name" is not a prompt name',
      'access[0].resources: "no scheme" is not a resource URI or a prefix ending in * (e.g. docs://handbook/*)',
    ]);
  });

  it("only the transport's headers reach the server, with the credential set last; only type and session id come back", () => {
    const sent = forwardedRequestHeaders(
      {
        authorization: 'Bearer agws_runtime',
        cookie: 'a=b',
        'x-api-key': 'agent-made',
        'x-forwarded-for': '1.2.3.4',
        accept: 'application/json, text/event-stream',
        'content-type': 'application/json',
        'mcp-protocol-version': '2025-06-18',
        'mcp-session-id': 's1',
        host: 'llm.agentws.internal',
      },
      { header: 'x-api-key', value: 'real' },
    );
    expect(sent).toEqual({ accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2025-06-18', 'mcp-session-id': 's1', 'x-api-key': 'real' });
    expect(forwardedRequestHeaders({ authorization: 'Bearer agws_runtime' }, null)).toEqual({});
    expect(returnedResponseHeaders({ 'content-type': 'text/event-stream', 'mcp-session-id': 's1', 'set-cookie': ['a=b'], 'www-authenticate': 'Bearer realm=x', location: 'http://evil' })).toEqual({
      'content-type': 'text/event-stream',
      'mcp-session-id': 's1',
    });
  });

  it('requests: the methods MCP defines are told apart; batches and malformed messages refused', () => {
    expect(classifyRequest({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'search', arguments: { q: 'x' } } })).toEqual({ kind: 'tool_call', id: 3, tool: 'search', args: { q: 'x' } });
    expect(classifyRequest({ jsonrpc: '2.0', id: 'a', method: 'tools/list' })).toEqual({ kind: 'tools_list', id: 'a' });
    expect(classifyRequest({ jsonrpc: '2.0', id: 1, method: 'resources/list' })).toEqual({ kind: 'resources_list', id: 1 });
    expect(classifyRequest({ jsonrpc: '2.0', id: 1, method: 'resources/templates/list' })).toEqual({ kind: 'resource_templates_list', id: 1 });
    expect(classifyRequest({ jsonrpc: '2.0', id: 1, method: 'resources/read', params: { uri: 'docs://a' } })).toEqual({ kind: 'resource_read', id: 1, uri: 'docs://a' });
    expect(classifyRequest({ jsonrpc: '2.0', id: 1, method: 'prompts/list' })).toEqual({ kind: 'prompts_list', id: 1 });
    expect(classifyRequest({ jsonrpc: '2.0', id: 1, method: 'prompts/get', params: { name: 'triage' } })).toEqual({ kind: 'prompt_get', id: 1, prompt: 'triage' });
    expect(classifyRequest({ jsonrpc: '2.0', id: 1, method: 'completion/complete', params: { ref: { type: 'ref/prompt', name: 'triage' }, argument: { name: 'a', value: 'b' } } })).toEqual({ kind: 'completion', id: 1, ref: { type: 'prompt', name: 'triage' } });
    expect(classifyRequest({ jsonrpc: '2.0', id: 1, method: 'completion/complete', params: { ref: { type: 'ref/resource', uri: 'docs://{x}' } } })).toEqual({ kind: 'completion', id: 1, ref: { type: 'resource', uri: 'docs://{x}' } });
    expect(classifyRequest({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} })).toEqual({ kind: 'other', id: 1, method: 'initialize' });
    expect(classifyRequest({ jsonrpc: '2.0', id: 1, method: 'ping' })).toEqual({ kind: 'other', id: 1, method: 'ping' });
    expect(classifyRequest({ jsonrpc: '2.0', method: 'notifications/initialized' })).toEqual({ kind: 'other', id: null, method: 'notifications/initialized' });
    expect(classifyRequest([{ jsonrpc: '2.0', id: 1, method: 'tools/call' }])).toMatchObject({ kind: 'invalid', problem: expect.stringMatching(/batches/) });
    expect(classifyRequest({ jsonrpc: '2.0', method: 'tools/call', params: { name: 'x' } })).toMatchObject({ kind: 'invalid', problem: 'tools/call needs an id' });
    expect(classifyRequest({ jsonrpc: '2.0', method: 'tools/list' })).toMatchObject({ kind: 'invalid' });
    expect(classifyRequest({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 7 } })).toMatchObject({ kind: 'invalid' });
    expect(classifyRequest({ jsonrpc: '2.0', id: 1, method: 'resources/read', params: {} })).toMatchObject({ kind: 'invalid' });
    expect(classifyRequest({ jsonrpc: '2.0', id: 1, method: 'completion/complete', params: { ref: { type: 'ref/other' } } })).toMatchObject({ kind: 'invalid' });
    expect(classifyRequest({ jsonrpc: '1.0', id: 1, method: 'ping' })).toMatchObject({ kind: 'invalid' });
    expect(classifyRequest({ jsonrpc: '2.0', id: { a: 1 }, method: 'ping' })).toMatchObject({ kind: 'invalid' });
    // An answer to a server request: the gateway passes none on, so there is nothing to answer.
    expect(classifyRequest({ jsonrpc: '2.0', id: 9, result: {} })).toMatchObject({ kind: 'invalid' });
  });

  it('methods in any other spelling, and methods MCP has but the gateway does not forward, are never forwarded', () => {
    for (const method of ['Tools/Call', 'tools/call ', ' tools/call', 'TOOLS/LIST', 'tools/call\u0000', 'tools//call', 'resources/Read', 'resources/subscribe', 'resources/unsubscribe', 'logging/setLevel', 'sampling/createMessage', 'x/anything', '']) {
      expect(classifyRequest({ jsonrpc: '2.0', id: 1, method, params: { name: 'wipe', uri: 'x://y' } }), JSON.stringify(method)).toEqual({ kind: 'unknown_method', id: 1, method });
    }
    expect(classifyRequest({ jsonrpc: '2.0', method: 'notifications/Initialized' })).toEqual({ kind: 'unknown_method', id: null, method: 'notifications/Initialized' });
    expect(classifyRequest({ jsonrpc: '2.0', method: 'notifications/tools/call' })).toEqual({ kind: 'unknown_method', id: null, method: 'notifications/tools/call' });
    // A notification's method with an id is a request of that name: not one MCP has.
    expect(classifyRequest({ jsonrpc: '2.0', id: 2, method: 'notifications/initialized' })).toEqual({ kind: 'unknown_method', id: 2, method: 'notifications/initialized' });
  });

  it('refuses what the grant does not cover, before forwarding', () => {
    const g = { tools: new Set(['lookup']), resources: ['docs://handbook/*'], prompts: new Set(['triage']) };
    expect(refusalOf({ kind: 'tool_call', id: 1, tool: 'lookup', args: {} }, g, 's')).toBeNull();
    expect(refusalOf({ kind: 'tool_call', id: 1, tool: 'wipe', args: {} }, g, 's')).toMatch(/tool "wipe" of the MCP server "s" is not allowed/);
    expect(refusalOf({ kind: 'resource_read', id: 1, uri: 'docs://handbook/a' }, g, 's')).toBeNull();
    expect(refusalOf({ kind: 'resource_read', id: 1, uri: 'docs://payroll' }, g, 's')).toMatch(/resource "docs:\/\/payroll"/);
    expect(refusalOf({ kind: 'prompt_get', id: 1, prompt: 'triage' }, g, 's')).toBeNull();
    expect(refusalOf({ kind: 'prompt_get', id: 1, prompt: 'exfiltrate' }, g, 's')).toMatch(/prompt "exfiltrate"/);
    expect(refusalOf({ kind: 'completion', id: 1, ref: { type: 'prompt', name: 'exfiltrate' } }, g, 's')).toMatch(/prompt/);
    expect(refusalOf({ kind: 'completion', id: 1, ref: { type: 'resource', uri: 'docs://handbook/{page}' } }, g, 's')).toBeNull();
    expect(refusalOf({ kind: 'tools_list', id: 1 }, g, 's')).toBeNull();
  });

  it("answers: lists cut to the grant, the server's own requests dropped, outcomes read", () => {
    const g = { tools: new Set(['search']), resources: ['docs://handbook/*'], prompts: new Set(['triage']) };
    const all = { tools: '*' as const, resources: '*' as const, prompts: '*' as const };
    const list = { kind: 'tools_list' as const, id: 1 };
    const answer = { jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'search' }, { name: 'delete_all' }] } };
    expect(screenAnswer(answer, list, g)).toEqual({ jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'search' }] } });
    expect(screenAnswer(answer, list, all)).toBe(answer);
    const resources = { jsonrpc: '2.0', id: 2, result: { resources: [{ uri: 'docs://handbook/a', name: 'a' }, { uri: 'docs://payroll', name: 'p' }, { name: 'no uri' }], nextCursor: 'c' } };
    expect(screenAnswer(resources, { kind: 'resources_list', id: 2 }, g)).toEqual({ jsonrpc: '2.0', id: 2, result: { resources: [{ uri: 'docs://handbook/a', name: 'a' }], nextCursor: 'c' } });
    const templates = { jsonrpc: '2.0', id: 3, result: { resourceTemplates: [{ uriTemplate: 'docs://handbook/{page}' }, { uriTemplate: 'docs://{any}' }] } };
    expect(screenAnswer(templates, { kind: 'resource_templates_list', id: 3 }, g)).toEqual({ jsonrpc: '2.0', id: 3, result: { resourceTemplates: [{ uriTemplate: 'docs://handbook/{page}' }] } });
    const prompts = { jsonrpc: '2.0', id: 4, result: { prompts: [{ name: 'triage' }, { name: 'exfiltrate' }] } };
    expect(screenAnswer(prompts, { kind: 'prompts_list', id: 4 }, g)).toEqual({ jsonrpc: '2.0', id: 4, result: { prompts: [{ name: 'triage' }] } });
    // A granted read answered with more than was asked: only granted URIs come back.
    const read = { jsonrpc: '2.0', id: 5, result: { contents: [{ uri: 'docs://handbook/a', text: 'ok' }, { uri: 'docs://payroll', text: 'secret' }] } };
    expect(screenAnswer(read, { kind: 'resource_read', id: 5, uri: 'docs://handbook/a' }, g)).toEqual({ jsonrpc: '2.0', id: 5, result: { contents: [{ uri: 'docs://handbook/a', text: 'ok' }] } });
    // Nothing granted: empty lists (the agent's client still works).
    const nothing = grantFor([{ role: 'member', tools: [] }], ['member'])!;
    expect(screenAnswer(prompts, { kind: 'prompts_list', id: 4 }, nothing)).toEqual({ jsonrpc: '2.0', id: 4, result: { prompts: [] } });
    expect(screenAnswer({ jsonrpc: '2.0', id: 9, method: 'sampling/createMessage', params: {} }, list, all)).toBeNull();
    expect(screenAnswer({ jsonrpc: '2.0', method: 'notifications/progress', params: {} }, list, all)).not.toBeNull();
    expect(screenAnswer('text', list, all)).toBeNull();
    expect(toolCallOutcome({ jsonrpc: '2.0', id: 1, result: { content: [] } })).toEqual({ ok: true });
    expect(toolCallOutcome({ jsonrpc: '2.0', id: 1, result: { content: [], isError: true } })).toMatchObject({ ok: false });
    expect(toolCallOutcome({ jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'Unknown tool' } })).toEqual({ ok: false, error: 'Unknown tool' });
  });

  it('an event stream is split into events as it arrives, bounded, and written back one data line each', () => {
    const s = createSseSplitter(100);
    expect(s.push('event: message\nid: 1\ndata: {"a"')).toEqual([]);
    expect(s.push(':1}\n\ndata: {"b":2}\r\n\r\nda')).toEqual([
      { fields: ['event: message', 'id: 1'], data: '{"a":1}' },
      { fields: [], data: '{"b":2}' },
    ]);
    expect(() => s.push('x'.repeat(200))).toThrow(/exceeds 100 bytes/);
    expect(sseEvent(['event: message', 'id: 1'], { a: 1 })).toBe('event: message\nid: 1\ndata: {"a":1}\n\n');
    expect(sseEvent([], null)).toBe('');
  });
});
