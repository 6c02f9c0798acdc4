import http from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createMcpGateway } from '../../src/core/connectors/mcp-gateway.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createEgressProxy } from '../../src/core/runtime/host/egress-proxy.js';
import type { RuntimeIdentity } from '../../src/core/runtime/host/runtime-host.js';
import { median, percentile, report } from './bench-utils.js';
import { spawnUntil } from '../helpers/cli.js';
import { onCpu1, removeDir, stopAll, track } from './agent-bench-utils.js';

const CALLS = Number(process.env.BENCH_MCP_CALLS ?? 500);
const WARMUP = 50;
const CREDENTIAL = 'bench-runtime-credential';
const TOKEN = 'bench-mcp-token';

/** One JSON-RPC message POSTed, read to its end. `via` set: through the proxy's Unix socket, absolute form. */
function call(target: { url: string; agent: http.Agent; via?: string; auth: string }, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const u = new URL(target.url);
    const t0 = performance.now();
    const req = http.request(
      {
        agent: target.agent,
        method: 'POST',
        ...(target.via ? { socketPath: target.via, path: target.url } : { host: u.hostname, port: u.port, path: u.pathname }),
        headers: { host: u.host, authorization: target.auth, accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => (res.statusCode === 200 && text.includes('ticket T-1') ? resolve(performance.now() - t0) : reject(new Error(`status ${res.statusCode}: ${text.slice(0, 200)}`))));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const ms = (xs: number[]) => `${median(xs).toFixed(2)} / ${percentile(xs, 99).toFixed(2)} / ${Math.max(...xs).toFixed(2)}`;

/**
 * What the MCP connector gateway adds to a tool call from a sandboxed runtime: the call goes over the
 * runtime's egress proxy listener (Unix socket, absolute-form request as opencode sends it through
 * HTTP_PROXY) to the gateway (runtime credential, the user's grant of the server and tool, header
 * allow-list, the server's token added, the event stream screened event by event) and on to a real MCP
 * server (the official SDK, answering tools/call as an event stream), instead of straight to the server.
 * The grant comes from a stub (in the service it is a cached database read, 2 s) and the audit entry is
 * written after the answer, off the measured path. The proxy, gateway and client run in this process;
 * the server in its own, on CPU 1.
 * Baseline in the same run: the same call straight to the server, interleaved A/B (order alternating).
 * Target: added latency (gateway - direct, paired) p99 <= 5 ms.
 */
export async function mcpGatewayBench(): Promise<boolean> {
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-mcpgw-'));
  const root = new URL('../..', import.meta.url).pathname;
  // The server in its own process on CPU 1 (its work and garbage collection out of the measured process).
  const server = await spawnUntil(...onCpu1(process.execPath, ['--import', 'tsx', join(root, 'test', 'bench', 'fixtures', 'mcp-server-proc.ts')]), { cwd: root, env: { PATH: process.env.PATH, TOKEN } }, (l) =>
    l.startsWith('{"url"') ? (JSON.parse(l).url as string) : undefined,
  );
  track('MCP server (SDK)', server.child);
  const mcp = { url: server.value };
  let audited = 0;
  const gateway = createMcpGateway({
    grantOf: async (_tenantId, _userId, name) => ({ name, url: mcp.url, credential: { header: 'authorization', value: `Bearer ${TOKEN}` }, tools: new Set(['lookup']), resources: [], prompts: new Set<string>() }),
    audit: () => void audited++,
    auditOnce: () => {},
    log: silentLogger,
  });
  const proxy = createEgressProxy<RuntimeIdentity>({
    decide: async () => ({ ok: false as const, reason: 'bench: the gateway host only' }),
    gateway: (identity, req, res, url) => gateway.handle(identity, req, res, url),
    refused: () => {},
    log: silentLogger,
  });
  const socket = join(dir, 'egress.sock');
  const listener = await proxy.listen({ tenantId: 't', userId: 'u', credential: CREDENTIAL }, { path: socket });
  const agents: http.Agent[] = [];
  const agent = () => {
    const a = new http.Agent({ keepAlive: true, maxSockets: 1 });
    agents.push(a);
    return a;
  };
  try {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'lookup', arguments: { id: 'T-1' } } });
    const direct = { url: mcp.url, agent: agent(), auth: `Bearer ${TOKEN}` };
    const viaGateway = { url: 'http://llm.agentws.internal/mcp/connectors/tracker', agent: agent(), via: socket, auth: `Bearer ${CREDENTIAL}` };
    const d: number[] = [];
    const g: number[] = [];
    const added: number[] = [];
    for (let i = 0; i < WARMUP + CALLS; i++) {
      let td: number;
      let tg: number;
      if (i % 2) {
        td = await call(direct, body);
        tg = await call(viaGateway, body);
      } else {
        tg = await call(viaGateway, body);
        td = await call(direct, body);
      }
      if (i < WARMUP) continue;
      d.push(td);
      g.push(tg);
      added.push(tg - td);
    }
    const p99 = percentile(added, 99);
    return report(
      'MCP connector gateway: tool call overhead',
      {
        calls: `${CALLS} (after ${WARMUP} warm-up), interleaved`,
        'direct p50 / p99 / max (ms)': ms(d),
        'via gateway p50 / p99 / max (ms)': ms(g),
        'added p50 / p99 (ms)': `${median(added).toFixed(2)} / ${p99.toFixed(2)}`,
        'tool calls audited': audited,
      },
      { ok: p99 <= 5, target: 'added p99 <= 5 ms' },
    );
  } finally {
    for (const a of agents) a.destroy();
    await listener.close();
    await stopAll([server.child]);
    removeDir(dir);
  }
}
