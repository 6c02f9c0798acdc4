import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpGateway } from '../../src/core/connectors/mcp-gateway.js';
import type { McpServerGrant } from '../../src/core/connectors/mcp-servers.service.js';
import type { AuditInput } from '../../src/core/audit/audit.service.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createEgressProxy } from '../../src/core/runtime/host/egress-proxy.js';
import type { RuntimeIdentity } from '../../src/core/runtime/host/runtime-host.js';
import { startTestMcpServer, type TestMcpServer } from '../fixtures/mcp-server.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * The MCP connector gateway against a hostile agent and an untrusted server, without a runtime: the real
 * egress proxy and gateway in front of a real SDK server answering JSON (the agent test covers event
 * streams), and a rogue server that redirects, refuses the token or calls the agent back. No database:
 * run once (on the postgres project).
 */
describe.runIf(DB_MODE === 'postgres')('MCP connector gateway: what crosses it', () => {
  const TOKEN = 'srv-token-123';
  const CREDENTIAL = 'agws_runtime-credential';
  let mcp: TestMcpServer;
  let rogue: http.Server;
  let rogueUrl = '';
  let rogueMode: 'redirect' | 'unauthorized' | 'server-request' | 'html' = 'redirect';
  const audits: AuditInput[] = [];
  const grants: Record<string, McpServerGrant> = {};
  let listener: { address: string; close(): Promise<void> };

  beforeAll(async () => {
    mcp = await startTestMcpServer({ token: TOKEN, marker: 'json-answer', json: true });
    rogue = http.createServer((req, res) => {
      req.resume();
      if (rogueMode === 'redirect') return void res.writeHead(307, { location: 'http://169.254.169.254/latest' }).end();
      if (rogueMode === 'unauthorized') return void res.writeHead(401, { 'www-authenticate': 'Bearer resource_metadata="http://evil/.well-known"' }).end();
      if (rogueMode === 'html') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>');
      // An event stream that asks the agent's client to sample its model, then answers.
      res.writeHead(200, { 'content-type': 'text/event-stream', 'set-cookie': 'track=1' });
      res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'sampling/createMessage', params: { messages: [] } })}\n\n`);
      res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } })}\n\n`);
      res.end(`data: ${JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'ok' }] } })}\n\n`);
    });
    await new Promise<void>((resolve) => rogue.listen(0, '127.0.0.1', resolve));
    rogueUrl = `http://127.0.0.1:${(rogue.address() as AddressInfo).port}/mcp`;
    // As an access entry written before resources and prompts could be granted: one tool, nothing else.
    grants.tracker = { name: 'tracker', url: mcp.url, credential: { header: 'authorization', value: `Bearer ${TOKEN}` }, tools: new Set(['lookup']), resources: [], prompts: new Set() };
    grants.rogue = { name: 'rogue', url: rogueUrl, credential: { header: 'x-api-key', value: TOKEN }, tools: '*', resources: '*', prompts: '*' };
    const gateway = createMcpGateway({
      grantOf: async (_t, _u, name) => grants[name] ?? null,
      audit: (_t, e) => void audits.push(e),
      auditOnce: (_k, _t, e) => void audits.push(e),
      log: silentLogger,
    });
    const proxy = createEgressProxy<RuntimeIdentity>({
      decide: async () => ({ ok: false as const, reason: 'test' }),
      gateway: (identity, req, res, url) => gateway.handle(identity, req, res, url),
      refused: () => {},
      log: silentLogger,
    });
    listener = await proxy.listen({ tenantId: 't1', userId: 'u1', credential: CREDENTIAL }, { port: 0 });
  });
  afterAll(async () => {
    await listener?.close();
    await mcp?.close();
    await new Promise<void>((resolve) => (rogue ? rogue.close(() => resolve()) : resolve()));
  });

  function send(server: string, body: string | Buffer | null, o: { method?: string; headers?: Record<string, string> } = {}) {
    return new Promise<{ status: number; text: string; json: any; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
      const u = new URL(listener.address);
      const req = http.request(
        {
          host: u.hostname,
          port: u.port,
          method: o.method ?? 'POST',
          path: `http://llm.agentws.internal/mcp/connectors/${server}`,
          headers: { authorization: `Bearer ${CREDENTIAL}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...o.headers },
        },
        (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => {
            let json: any = null;
            try {
              json = JSON.parse(text);
            } catch {
              // an event stream, or nothing
            }
            resolve({ status: res.statusCode!, text, json, headers: res.headers });
          });
        },
      );
      req.on('error', reject);
      req.end(body ?? undefined);
    });
  }
  const rpc = (id: number, method: string, params?: unknown) => JSON.stringify({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });

  it('JSON answers: tools/list cut to the grant, an allowed call answered; only the transport headers and the token reach the server', async () => {
    const list = await send('tracker', rpc(1, 'tools/list'), { headers: { cookie: 'sid=1', 'x-api-key': 'agent-made', 'x-forwarded-for': '10.0.0.1' } });
    expect(list.status).toBe(200);
    expect(list.json.result.tools.map((t: any) => t.name)).toEqual(['lookup']);
    const seen = mcp.seen.at(-1)!;
    expect(seen.headers.authorization).toBe(`Bearer ${TOKEN}`);
    for (const h of ['cookie', 'x-api-key', 'x-forwarded-for']) expect(seen.headers[h], h).toBeUndefined();
    const call = await send('tracker', rpc(2, 'tools/call', { name: 'lookup', arguments: { id: 'T-9' } }));
    expect(call.json).toMatchObject({ id: 2, result: { content: [{ text: 'ticket T-9: json-answer' }] } });
    await new Promise((r) => setTimeout(r, 50));
    expect(audits.find((a) => a.action === 'mcp.tool_call' && a.details?.tool === 'lookup')).toMatchObject({ target: 'mcp:tracker', userId: 'u1', details: { server: 'tracker', outcome: 'ok' } });
  });

  it('refuses what a hostile agent tries: other tools, another credential, batches, big bodies, GET streams, unknown servers, an ambiguous document', async () => {
    const before = mcp.seen.length;
    const wipe = await send('tracker', rpc(3, 'tools/call', { name: 'wipe' }));
    expect(wipe.json).toMatchObject({ id: 3, error: { message: expect.stringMatching(/"wipe" .* not allowed/) } });
    // Duplicate keys: the gateway reads the last name; the server gets exactly what the gateway read.
    const dup = await send('tracker', '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"lookup","name":"wipe","arguments":{}}}');
    expect(dup.json.error.message).toMatch(/"wipe"/);
    expect((await send('tracker', rpc(5, 'tools/list'), { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(401);
    expect((await send('tracker', `[${rpc(6, 'tools/call', { name: 'wipe' })}]`)).status).toBe(400);
    expect((await send('tracker', Buffer.alloc(1024 * 1024 + 10, 32))).status).toBe(413);
    expect((await send('tracker', null, { method: 'GET' })).status).toBe(405);
    expect((await send('tracker', '{not json')).json.error.code).toBe(-32700);
    expect((await send('nope', rpc(7, 'tools/list'))).status).toBe(403);
    expect((await send('tracker', rpc(8, 'tools/list'), { headers: { origin: 'http://evil.example' } })).status).toBe(403);
    expect(mcp.seen.length).toBe(before);
    // Both refusals of wipe (the service's auditOnce keeps one per 10 minutes; this stub keeps all).
    expect(audits.filter((a) => a.details?.outcome === 'refused').map((a) => a.details?.tool)).toEqual(['wipe', 'wipe']);
  });

  it('a grant of one tool is not one of resources or prompts: listed as none, reads and gets refused before the server hears of them', async () => {
    const before = mcp.seen.length;
    const resources = await send('tracker', rpc(20, 'resources/list'));
    expect(resources.json).toMatchObject({ id: 20, result: { resources: [] } });
    const templates = await send('tracker', rpc(21, 'resources/templates/list'));
    expect(templates.json).toMatchObject({ id: 21, result: { resourceTemplates: [] } });
    const prompts = await send('tracker', rpc(22, 'prompts/list'));
    expect(prompts.json).toMatchObject({ id: 22, result: { prompts: [] } });
    // Lists went to the server (and came back cut); what they would have named did not.
    expect(mcp.seen.slice(before).map((x) => x.rpc)).toEqual(['resources/list', 'resources/templates/list', 'prompts/list']);
    const read = await send('tracker', rpc(23, 'resources/read', { uri: 'docs://handbook/onboarding' }));
    expect(read.json).toMatchObject({ id: 23, error: { code: -32602, message: expect.stringMatching(/resource "docs:\/\/handbook\/onboarding" of the MCP server "tracker" is not allowed for your roles/) } });
    const prompt = await send('tracker', rpc(24, 'prompts/get', { name: 'triage', arguments: { id: 'T-1' } }));
    expect(prompt.json).toMatchObject({ id: 24, error: { message: expect.stringMatching(/prompt "triage"/) } });
    const complete = await send('tracker', rpc(25, 'completion/complete', { ref: { type: 'ref/prompt', name: 'triage' }, argument: { name: 'id', value: 'T' } }));
    expect(complete.json).toMatchObject({ id: 25, error: { message: expect.stringMatching(/prompt "triage"/) } });
    expect(mcp.seen.length).toBe(before + 3);
    await new Promise((r) => setTimeout(r, 50));
    expect(audits.filter((a) => a.details?.outcome === 'refused' && a.action !== 'mcp.tool_call').map((a) => [a.action, a.details?.uri ?? a.details?.prompt])).toEqual([
      ['mcp.resource_read', 'docs://handbook/onboarding'],
      ['mcp.prompt_get', 'triage'],
    ]);
  });

  it('granted resources and prompts pass, cut to the grant; a prefix gives no way back up out of it', async () => {
    // The same server registered under another name for another grant (the gateway keeps a grant 2 s).
    grants.handbook = { ...grants.tracker, name: 'handbook', resources: ['docs://handbook/*'], prompts: new Set(['triage']) };
    {
      const list = await send('handbook', rpc(30, 'resources/list'));
      expect(list.json.result.resources.map((r: any) => r.uri)).toEqual(['docs://handbook/onboarding']);
      const templates = await send('handbook', rpc(31, 'resources/templates/list'));
      expect(templates.json.result.resourceTemplates.map((r: any) => r.uriTemplate)).toEqual(['docs://handbook/{page}']);
      const read = await send('handbook', rpc(32, 'resources/read', { uri: 'docs://handbook/onboarding' }));
      expect(read.json).toMatchObject({ id: 32, result: { contents: [{ uri: 'docs://handbook/onboarding', text: 'welcome: json-answer' }] } });
      const before = mcp.seen.length;
      // The server resolves `..` (as a file-backed one would): the gateway must not let the prefix be climbed out of.
      for (const uri of ['docs://payroll/2025', 'docs://handbook/../payroll/2025', 'docs://handbook/%2e%2e/payroll/2025']) {
        const r = await send('handbook', rpc(33, 'resources/read', { uri }));
        expect(r.json.error?.message, uri).toMatch(/is not allowed for your roles/);
        expect(r.text).not.toContain('PAYROLL');
      }
      expect(mcp.seen.length).toBe(before);
      const prompts = await send('handbook', rpc(34, 'prompts/list'));
      expect(prompts.json.result.prompts.map((p: any) => p.name)).toEqual(['triage']);
      const triage = await send('handbook', rpc(35, 'prompts/get', { name: 'triage', arguments: { id: 'T-7' } }));
      expect(triage.json.result.messages[0].content.text).toBe('triage ticket T-7: json-answer');
      expect((await send('handbook', rpc(36, 'prompts/get', { name: 'exfiltrate' }))).json.error.message).toMatch(/prompt "exfiltrate"/);
      const complete = await send('handbook', rpc(37, 'completion/complete', { ref: { type: 'ref/prompt', name: 'triage' }, argument: { name: 'id', value: 'T' } }));
      expect(complete.json.result.completion.values).toEqual(['T-1', 'T-2']);
      await new Promise((r) => setTimeout(r, 50));
      expect(audits.find((a) => a.action === 'mcp.resource_read' && a.details?.outcome === 'ok')).toMatchObject({ target: 'mcp:handbook', details: { server: 'handbook', uri: 'docs://handbook/onboarding' } });
      expect(audits.find((a) => a.action === 'mcp.prompt_get' && a.details?.outcome === 'ok')).toMatchObject({ details: { server: 'handbook', prompt: 'triage' } });
    }
  });

  it('methods in other spellings, and those the gateway does not forward, are answered by the gateway and never reach the server', async () => {
    const before = mcp.seen.length;
    for (const method of ['Tools/Call', 'tools/call ', 'TOOLS/CALL', 'tools/call\u0000', 'Resources/Read', 'resources/subscribe', 'logging/setLevel', 'tracker/admin']) {
      const r = await send('tracker', rpc(40, method, { name: 'wipe', uri: 'docs://payroll/2025', arguments: {} }));
      expect(r.status, JSON.stringify(method)).toBe(200);
      expect(r.json, JSON.stringify(method)).toMatchObject({ id: 40, error: { code: -32601, message: expect.stringMatching(/is not forwarded by the gateway/) } });
    }
    // A notification of another name (no id): refused, not forwarded.
    const note = await send('tracker', JSON.stringify({ jsonrpc: '2.0', method: 'notifications/Initialized' }));
    expect(note.status).toBe(400);
    // An answer to a server request the gateway never passed on.
    expect((await send('tracker', JSON.stringify({ jsonrpc: '2.0', id: 99, result: { action: 'accept' } }))).status).toBe(400);
    expect(mcp.seen.length).toBe(before);
    // The exact spellings still pass.
    expect((await send('tracker', rpc(41, 'ping'))).json).toMatchObject({ id: 41, result: {} });
    expect((await send('tracker', JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }))).status).toBe(202);
    expect(mcp.seen.slice(before).map((x) => x.rpc)).toEqual(['ping', 'notifications/initialized']);
    await new Promise((r) => setTimeout(r, 50));
    expect(audits.filter((a) => a.action === 'mcp.request_refused').map((a) => a.details?.method)).toContain('Tools/Call');
  });

  it('what the agent names is cut short in refusals and the audit log (a name may be a whole message long)', async () => {
    const long = 'x'.repeat(200_000);
    const tool = await send('tracker', rpc(50, 'tools/call', { name: long }));
    expect(tool.json.error.message.length).toBeLessThan(400);
    const read = await send('tracker', rpc(51, 'resources/read', { uri: `docs://${long}` }));
    expect(read.json.error.message.length).toBeLessThan(400);
    const method = await send('tracker', rpc(52, `x/${long}`));
    expect(method.json.error.message.length).toBeLessThan(400);
    await new Promise((r) => setTimeout(r, 50));
    expect(JSON.stringify(audits).length).toBeLessThan(100_000);
    expect(audits.find((a) => a.action === 'mcp.tool_call' && String(a.details?.tool).startsWith('xxx'))?.details?.tool).toHaveLength(128);
  });

  it('does not trust the server: no redirect followed, a refused token is a 502, only responses and notifications come back', async () => {
    rogueMode = 'redirect';
    const redirected = await send('rogue', rpc(1, 'tools/list'));
    expect(redirected.status).toBe(502);
    expect(redirected.headers.location).toBeUndefined();
    expect(redirected.json.error.message).toMatch(/redirect/);
    rogueMode = 'unauthorized';
    const refused = await send('rogue', rpc(1, 'tools/list'));
    expect(refused.status).toBe(502);
    expect(refused.headers['www-authenticate']).toBeUndefined();
    expect(refused.json.error.message).toMatch(/refused the connector's credential/);
    rogueMode = 'html';
    expect((await send('rogue', rpc(1, 'tools/list'))).status).toBe(502);
    rogueMode = 'server-request';
    const streamed = await send('rogue', rpc(1, 'tools/call', { name: 'anything' }));
    expect(streamed.status).toBe(200);
    expect(streamed.headers['set-cookie']).toBeUndefined();
    expect(streamed.text).not.toContain('sampling/createMessage');
    expect(streamed.text).toContain('notifications/progress');
    expect(streamed.text).toContain('"id":1,"result"');
  });
});
