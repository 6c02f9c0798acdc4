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
    const member = grantFor(access, ['member', 'reviewer'])!;
    expect(member).not.toBe('*');
    expect([...(member as Set<string>)].sort()).toEqual(['get_issue', 'search']);
    expect(grantFor(access, ['member', 'admin'])).toBe('*');
    expect(toolGranted(member, 'search')).toBe(true);
    expect(toolGranted(member, 'delete_everything')).toBe(false);
    expect(toolGranted('*', 'anything')).toBe(true);
    // Listed with no tools: the server, but none of its tools.
    const none = grantFor([{ role: 'member', tools: [] }], ['member'])!;
    expect(toolGranted(none, 'search')).toBe(false);
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

  it('requests: tools/call and tools/list are told apart; batches and malformed messages refused', () => {
    expect(classifyRequest({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'search', arguments: { q: 'x' } } })).toEqual({ kind: 'tool_call', id: 3, tool: 'search', args: { q: 'x' } });
    expect(classifyRequest({ jsonrpc: '2.0', id: 'a', method: 'tools/list' })).toEqual({ kind: 'tools_list', id: 'a' });
    expect(classifyRequest({ jsonrpc: '2.0', method: 'notifications/initialized' })).toEqual({ kind: 'other', id: null, method: 'notifications/initialized' });
    expect(classifyRequest([{ jsonrpc: '2.0', id: 1, method: 'tools/call' }])).toMatchObject({ kind: 'invalid', problem: expect.stringMatching(/batches/) });
    expect(classifyRequest({ jsonrpc: '2.0', method: 'tools/call', params: { name: 'x' } })).toMatchObject({ kind: 'invalid' });
    expect(classifyRequest({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 7 } })).toMatchObject({ kind: 'invalid' });
    expect(classifyRequest({ jsonrpc: '1.0', id: 1, method: 'ping' })).toMatchObject({ kind: 'invalid' });
  });

  it("answers: tools/list cut to the grant, the server's own requests dropped, outcomes read", () => {
    const list = { kind: 'tools_list' as const, id: 1 };
    const answer = { jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'search' }, { name: 'delete_all' }] } };
    expect(screenAnswer(answer, list, new Set(['search']))).toEqual({ jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'search' }] } });
    expect(screenAnswer(answer, list, '*')).toBe(answer);
    expect(screenAnswer({ jsonrpc: '2.0', id: 9, method: 'sampling/createMessage', params: {} }, list, '*')).toBeNull();
    expect(screenAnswer({ jsonrpc: '2.0', method: 'notifications/progress', params: {} }, list, '*')).not.toBeNull();
    expect(screenAnswer('text', list, '*')).toBeNull();
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
