import { readFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { regularFilesUnder } from '../helpers/files.js';
import { managedConfigDir, runtimeRoot } from '../../src/core/runtime/host/managed-config.js';
import { workspaceDir } from '../../src/lib/data-paths.js';
import type { FakeStep } from '../fixtures/fake-llm.js';
import { startTestMcpServer, type TestMcpServer } from '../fixtures/mcp-server.js';
import { api } from '../helpers/app.js';
import { agentTurn, applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';
import { UNKNOWN_SELF } from '../../src/core/runtime/host/runtime-host.js';

/**
 * MCP connectors end to end: a real MCP server built with the official SDK on
 * loopback, requiring a bearer token, with two tools. A member's role may use one of them: the scripted
 * agent in a real sandbox calls it through the gateway host and gets its answer, audited with the user,
 * session, server and tool; the other tool is refused at the gateway; a role without the server has none
 * of it (not in its runtime, refused at the gateway); and the token is nowhere the agent can look.
 *
 * Run alone: npx vitest run --config test/vitest.config.ts --project runtime test/api/mcp-connectors-agent.runtime.test.ts
 */
describe.runIf(DB_MODE === 'postgres')('MCP connectors: an agent uses a real MCP server without its token', { timeout: 120_000 }, () => {
  const TOKEN = `mcp_tok_${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
  const MARKER = `answer-${Math.random().toString(36).slice(2)}`;
  let mcp: TestMcpServer;
  let r: RuntimeApp;
  let acme: Awaited<ReturnType<typeof seedPeople>>;

  const call = (name: string, args: Record<string, unknown>): FakeStep[] => [{ toolCall: { name, arguments: args } }, { text: 'done' }];
  const offered = (t: Awaited<ReturnType<typeof agentTurn>>): string[] => (t.requests[0].body.tools ?? []).map((x: any) => x.function?.name as string);

  /** One JSON-RPC message to a connector through a proxy listener of `userId`'s (as their runtime would send it). */
  async function viaGateway(userId: string, message: unknown, o: { server?: string; auth?: string } = {}) {
    const credential = 'agws_test-credential';
    const listener = await r.t.opened.core.egress.listen({ tenantId: acme.tenantId, userId, credential, self: UNKNOWN_SELF }, { port: 0 });
    try {
      return await new Promise<{ status: number; json: any; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
        const u = new URL(listener.address);
        const req = http.request(
          {
            host: u.hostname,
            port: u.port,
            method: 'POST',
            path: `http://llm.agentws.internal/mcp/connectors/${o.server ?? 'tracker'}`,
            headers: { authorization: o.auth ?? `Bearer ${credential}`, cookie: 'sid=agent', 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
          },
          (res) => {
            let text = '';
            res.on('data', (c) => (text += c));
            res.on('end', () => {
              // An event stream carries the answer as one data line.
              const data = res.headers['content-type']?.startsWith('text/event-stream') ? /^data: (.*)$/m.exec(text)?.[1] : text;
              resolve({ status: res.statusCode!, json: data ? JSON.parse(data) : null, headers: res.headers });
            });
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify(message));
      });
    } finally {
      await listener.close();
    }
  }

  beforeAll(async () => {
    mcp = await startTestMcpServer({ token: TOKEN, marker: MARKER });
    r = await startRuntimeApp();
    acme = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, acme.tokens.owner, r.llm);
    const added = await api(r.t, 'POST', '/v1/admin/connectors/mcp', { token: acme.tokens.owner, body: { name: 'tracker', url: mcp.url, secret: TOKEN, access: [{ role: 'member', tools: ['lookup'] }] } });
    expect(added.status, added.text).toBe(201);
  }, 180_000);
  afterAll(async () => {
    await r?.close();
    await mcp?.close();
  });

  it("a member's agent calls an allowed tool and gets its answer; the call is audited with user, session, server and tool", async () => {
    const started = Date.now();
    const t1 = await agentTurn(r, acme.tokens.member, call('tracker_lookup', { id: 'T-1' }), { text: 'look up T-1', title: 'mcp' });
    expect(offered(t1)).toContain('tracker_lookup');
    expect(offered(t1)).not.toContain('tracker_wipe');
    expect(t1.tools.map((p) => p.state?.status), t1.output).toEqual(['completed']);
    expect(t1.output).toContain(`ticket T-1: ${MARKER}`);
    // The server got the call with its token, and nothing of the agent's own headers.
    const calls = mcp.seen.filter((s) => s.tool === 'lookup');
    expect(calls).toHaveLength(1);
    for (const s of mcp.seen) {
      expect(s.headers.authorization).toBe(`Bearer ${TOKEN}`);
      expect(s.headers.cookie).toBeUndefined();
    }
    expect(mcp.seen.some((s) => s.tool === 'wipe')).toBe(false);

    // Audited once the call ended (the entry is written after the answer went back).
    let entry: any;
    for (let i = 0; i < 50 && !entry; i++) {
      entry = (await r.t.opened.db.query(`select user_id, session_id, target, duration_ms, channel, details from audit_log where tenant_id = $1 and action = 'mcp.tool_call' and details->>'outcome' = 'ok'`, [acme.tenantId])).rows[0];
      if (!entry) await new Promise((res) => setTimeout(res, 100));
    }
    expect(entry).toMatchObject({ user_id: acme.ids.mia, session_id: t1.sessionId, target: 'mcp:tracker', channel: 'agent', details: { server: 'tracker', tool: 'lookup', outcome: 'ok' } });
    expect(entry.duration_ms).toBeGreaterThanOrEqual(0);
    console.log(`mcp turn: ${Date.now() - started} ms`);
  });

  it('a tool the role is not given is refused at the gateway, and tools/list shows only the given ones', async () => {
    const before = mcp.seen.length;
    const wipe = await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'wipe', arguments: {} } });
    expect(wipe.status).toBe(200);
    expect(wipe.json).toMatchObject({ id: 5, error: { message: expect.stringMatching(/tool "wipe" of the MCP server "tracker" is not allowed for your roles/) } });
    expect(mcp.seen.length).toBe(before);
    const list = await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 6, method: 'tools/list' });
    expect(list.status).toBe(200);
    expect(list.json.result.tools.map((t: any) => t.name)).toEqual(['lookup']);
    expect(list.headers['set-cookie']).toBeUndefined();
    // The allowed tool answers the same way the runtime got it.
    const lookup = await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'lookup', arguments: { id: 'T-2' } } });
    expect(lookup.json.result.content[0].text).toBe(`ticket T-2: ${MARKER}`);
    // Without the runtime's credential, nothing.
    expect((await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 8, method: 'tools/list' }, { auth: `Bearer ${TOKEN}` })).status).toBe(401);
    // Paths that are not one connector's name go nowhere (the URL parser already resolved any `..`).
    expect((await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 9, method: 'tools/list' }, { server: 'tracker/x' })).status).toBe(404);
    expect((await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 9, method: 'tools/list' }, { server: 'tracker%2F..%2Fmemory' })).status).toBe(404);
    // The refusal's audit entry is written beside the answer, not before it.
    const refused = async () => (await r.t.opened.db.query(`select details from audit_log where tenant_id = $1 and action = 'mcp.tool_call' and details->>'outcome' = 'refused'`, [acme.tenantId])).rows.map((x) => x.details.tool);
    await expect.poll(refused, { timeout: 10_000 }).toEqual(['wipe']);
  });

  it("a member granted one tool reads no resource and gets no prompt, and no other spelling of a method reaches the server; an admin's grant of them lets exactly those through", async () => {
    const before = mcp.seen.length;
    const read = await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 11, method: 'resources/read', params: { uri: 'docs://payroll/2025' } });
    expect(read.json).toMatchObject({ id: 11, error: { message: expect.stringMatching(/resource "docs:\/\/payroll\/2025" of the MCP server "tracker" is not allowed/) } });
    const prompt = await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 12, method: 'prompts/get', params: { name: 'exfiltrate' } });
    expect(prompt.json).toMatchObject({ id: 12, error: { message: expect.stringMatching(/prompt "exfiltrate"/) } });
    for (const method of ['Tools/Call', 'tools/call ']) {
      const r = await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 13, method, params: { name: 'wipe', arguments: {} } });
      expect(r.json, method).toMatchObject({ id: 13, error: { code: -32601 } });
    }
    expect(mcp.seen.length).toBe(before);
    // Listing works, cut to nothing granted.
    expect((await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 14, method: 'resources/list' })).json.result.resources).toEqual([]);
    expect((await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 15, method: 'prompts/list' })).json.result.prompts).toEqual([]);

    const granted = await api(r.t, 'PATCH', '/v1/admin/connectors/mcp/tracker', { token: acme.tokens.owner, body: { access: [{ role: 'member', tools: ['lookup'], resources: ['docs://handbook/*'], prompts: ['triage'] }] } });
    expect(granted.status, granted.text).toBe(200);
    // The gateway takes a change within its 2 s grant cache.
    await expect.poll(async () => (await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 16, method: 'resources/list' })).json.result.resources.map((x: any) => x.uri)).toEqual(['docs://handbook/onboarding']);
    const handbook = await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 17, method: 'resources/read', params: { uri: 'docs://handbook/onboarding' } });
    expect(handbook.json.result.contents[0].text).toBe(`welcome: ${MARKER}`);
    const climbed = await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 18, method: 'resources/read', params: { uri: 'docs://handbook/../payroll/2025' } });
    expect(climbed.json.error.message).toMatch(/not allowed/);
    const triage = await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 19, method: 'prompts/get', params: { name: 'triage', arguments: { id: 'T-4' } } });
    expect(triage.json.result.messages[0].content.text).toBe(`triage ticket T-4: ${MARKER}`);
    expect((await viaGateway(acme.ids.mia, { jsonrpc: '2.0', id: 20, method: 'prompts/get', params: { name: 'exfiltrate' } })).json.error.message).toMatch(/not allowed/);
    expect(mcp.seen.some((x) => JSON.stringify(x.body ?? '').includes('payroll') || JSON.stringify(x.body ?? '').includes('exfiltrate'))).toBe(false);
    const audited = async () => (await r.t.opened.db.query(`select action, details from audit_log where tenant_id = $1 and action in ('mcp.resource_read', 'mcp.prompt_get', 'mcp.request_refused') order by ts`, [acme.tenantId])).rows.map((x) => [x.action, x.details.outcome ?? x.details.reason, x.details.uri ?? x.details.prompt ?? x.details.method]);
    await expect.poll(audited).toEqual(
      expect.arrayContaining([
        ['mcp.resource_read', 'refused', 'docs://payroll/2025'],
        ['mcp.prompt_get', 'refused', 'exfiltrate'],
        ['mcp.request_refused', 'refused', 'Tools/Call'],
        ['mcp.resource_read', 'ok', 'docs://handbook/onboarding'],
        ['mcp.prompt_get', 'ok', 'triage'],
      ]),
    );
    // Back to the tools-only grant the other tests expect.
    await api(r.t, 'PATCH', '/v1/admin/connectors/mcp/tracker', { token: acme.tokens.owner, body: { access: [{ role: 'member', tools: ['lookup'] }] } });
  });

  it('a role without the server has none of it: not in its runtime, refused at the gateway', async () => {
    const before = mcp.seen.length;
    const t2 = await agentTurn(r, acme.tokens.owner, [{ text: 'hello' }], { title: 'no mcp' });
    expect(offered(t2).filter((n: string) => n.startsWith('tracker_'))).toEqual([]);
    const config = readFileSync(join(managedConfigDir(runtimeRoot(r.t.env.dataDir, acme.ids.owner)), 'opencode.json'), 'utf8');
    expect(config).not.toContain('/mcp/connectors/');
    const direct = await viaGateway(acme.ids.owner, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'lookup', arguments: { id: 'T-3' } } });
    expect(direct.status).toBe(403);
    expect(direct.json.error.message).toMatch(/not available to you/);
    expect(mcp.seen.length).toBe(before);
  });

  it('the token is nowhere the agent can look: environment, files, /proc, its configuration, the transcript, the audit log', async () => {
    // Its configuration (/etc/opencode inside) is read on the host below, with every file of its runtime's root.
    // The path is built at run time: opencode's advisory rule refuses a literal path outside the workspace.
    const script = 'd=$(printf /%s proc); (env; cat $d/[0-9]*/environ $d/[0-9]*/cmdline) > seen.txt 2>&1; echo DUMPED';
    const t3 = await agentTurn(r, acme.tokens.member, call('bash', { command: script, description: 'look' }), { title: 'look' });
    expect(t3.output).toContain('DUMPED');
    const owner = { tenantId: acme.tenantId, userId: acme.ids.mia };
    const files = [...regularFilesUnder(workspaceDir(r.t.env.dataDir, owner)), ...regularFilesUnder(runtimeRoot(r.t.env.dataDir, owner.userId))];
    expect(files.some((f) => f.endsWith('seen.txt'))).toBe(true);
    // The dump holds the environment and the processes' (the runtime's own included).
    expect(readFileSync(join(workspaceDir(r.t.env.dataDir, owner), 'seen.txt'), 'latin1')).toMatch(/PATH=[\s\S]*opencode/);
    const port = new URL(mcp.url).port;
    let sawConfig = false;
    for (const f of files) {
      const text = readFileSync(f, 'latin1');
      expect(text.includes(TOKEN), f).toBe(false);
      // Not even where the server is: the runtime knows the gateway's address only.
      expect(text.includes(`127.0.0.1:${port}`), f).toBe(false);
      if (text.includes('/mcp/connectors/tracker')) sawConfig = true;
    }
    expect(sawConfig).toBe(true);
    const transcripts = JSON.stringify(t3.messages);
    expect(transcripts.includes(TOKEN)).toBe(false);
    const audit = JSON.stringify((await r.t.opened.db.query(`select * from audit_log where tenant_id = $1`, [acme.tenantId])).rows);
    expect(audit.includes(TOKEN)).toBe(false);
    const listed = await api(r.t, 'GET', '/v1/admin/connectors/mcp', { token: acme.tokens.owner });
    expect(listed.text.includes(TOKEN)).toBe(false);
  });
});
