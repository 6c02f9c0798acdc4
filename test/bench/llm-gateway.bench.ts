import http from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { median, percentile, pinned, report } from './bench-utils.js';
import { spawnUntil } from '../helpers/cli.js';
import { loadAvg, onCpu1, removeDir, schedMs, stopAll, track } from './agent-bench-utils.js';

const CALLS = Number(process.env.BENCH_GATEWAY_CALLS ?? 500);
const WARMUP = 50;
const TTFB_CALLS = Number(process.env.BENCH_GATEWAY_TTFB_CALLS ?? 20);
/** How long the provider waits after its first chunk in the time-to-first-chunk part. */
const HOLD_MS = 200;
const CREDENTIAL = 'bench-runtime-credential';
const GATEWAY_HOST = 'llm.agentws.internal';

interface Timing {
  /** Request sent -> first body chunk, ms. */
  first: number;
  /** Request sent -> end of the stream, ms. */
  total: number;
  bytes: number;
}

/** One streaming chat-completions call, read to its end. `via` set: through the proxy's Unix socket, absolute form. */
function call(target: { url: string; agent: http.Agent; via?: string }, body: string, session: string): Promise<Timing> {
  return new Promise((resolve, reject) => {
    const u = new URL(target.url);
    const t0 = performance.now();
    const req = http.request(
      {
        agent: target.agent,
        method: 'POST',
        ...(target.via ? { socketPath: target.via, path: target.url } : { host: u.hostname, port: u.port, path: u.pathname }),
        headers: { host: u.host, authorization: `Bearer ${CREDENTIAL}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-session-id': session },
      },
      (res) => {
        let first = -1;
        let bytes = 0;
        res.on('data', (d: Buffer) => {
          if (first < 0) first = performance.now() - t0;
          bytes += d.length;
        });
        res.on('end', () => (res.statusCode === 200 ? resolve({ first, total: performance.now() - t0, bytes }) : reject(new Error(`status ${res.statusCode}`))));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const ms = (xs: number[]) => `${median(xs).toFixed(2)} / ${percentile(xs, 99).toFixed(2)} / ${Math.max(...xs).toFixed(2)}`;

/**
 * What the LLM gateway adds to a model call from a sandboxed runtime: the call goes over the runtime's
 * egress proxy listener (Unix socket, absolute-form request as opencode sends it through HTTP_PROXY) to
 * the gateway (credential, provider and model checks, cost limits, the real key, usage tap) and on to the
 * provider, instead of straight to the provider. The proxy and gateway run in their own process pinned to
 * CPU 0 (as serve would); this client and the scripted models (test/bench/fixtures/paced-llm.mjs) on CPU 1.
 * Baseline in the same run: the same calls straight to the scripted model, interleaved A/B (the order
 * alternating) so both see the same machine.
 *  (a) CALLS streaming calls of a 20-chunk reply sent at once: per-call added latency (gateway - direct,
 *      paired), target p99 <= 5 ms;
 *  (b) a provider that sends its first chunk then holds the rest HOLD_MS: time to the first chunk through
 *      the gateway, target < HOLD_MS (not buffered) and p50 within 5 ms of direct.
 */
export async function llmGateway(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-llmgw-'));
  const agents: http.Agent[] = [];
  const agent = () => {
    const a = new http.Agent({ keepAlive: true, maxSockets: 1 });
    agents.push(a);
    return a;
  };
  let gw: Awaited<ReturnType<typeof spawnUntil<string>>> | undefined;
  try {
    const llm = (env: Record<string, string>) =>
      spawnUntil(...onCpu1(process.execPath, [join(root, 'test', 'bench', 'fixtures', 'paced-llm.mjs')]), { env: { PATH: process.env.PATH, ...env } }, (l) =>
        l.startsWith('{') ? (JSON.parse(l).url as string) : undefined,
      );
    const fast = await llm({ WORDS: '20', WORD_MS: '0' });
    track('scripted model (fast)', fast.child);
    const held = await llm({ WORDS: '1', WORD_MS: String(HOLD_MS) });
    track('scripted model (first chunk, then 200 ms)', held.child);
    const socket = join(dir, 'egress.sock');
    gw = await spawnUntil(
      ...pinned(process.execPath, ['--import', 'tsx', join(root, 'test', 'bench', 'fixtures', 'llm-gateway-proxy.ts')]),
      { cwd: root, env: { PATH: process.env.PATH, SOCKET: socket, CREDENTIAL, PROVIDERS: JSON.stringify({ fast: `${fast.value}/v1`, held: `${held.value}/v1` }), ACTIVE_CHECK: process.env.BENCH_ACTIVE_CHECK ?? 'on' } },
      (l) => (l.startsWith('{"socket"') ? (JSON.parse(l).socket as string) : undefined),
    );
    track('proxy + gateway', gw.child);
    let records = -1;
    gw.child.stdout!.on('data', (d) => {
      const m = /\{"records":(\d+)\}/.exec(String(d));
      if (m) records = Number(m[1]);
    });

    // An opencode-sized request: a system prompt and history of ~16 KB, streaming with usage.
    const body = JSON.stringify({
      model: 'bench-1',
      stream: true,
      stream_options: { include_usage: true },
      messages: [
        { role: 'system', content: 'You are a coding agent. '.repeat(600) },
        { role: 'user', content: 'Say hello.' },
      ],
    });
    const direct = (base: string) => ({ url: `${base}/v1/chat/completions`, agent: agent() });
    const viaGateway = (name: string) => ({ url: `http://${GATEWAY_HOST}/p/${name}/chat/completions`, agent: agent(), via: gw!.value });

    // (a) per-call added latency
    // The gateway process's CPU time, and its time runnable but waiting for a CPU (other work on the host).
    const sched0 = schedMs(gw.child.pid!);
    const a = { direct: direct(fast.value), gateway: viaGateway('fast') };
    const d: number[] = [];
    const g: number[] = [];
    const added: number[] = [];
    let bytes = { direct: 0, gateway: 0 };
    for (let i = 0; i < WARMUP + CALLS; i++) {
      const session = `ses_bench_${i % 10}`;
      let td: Timing;
      let tg: Timing;
      if (i % 2) {
        td = await call(a.direct, body, session);
        tg = await call(a.gateway, body, session);
      } else {
        tg = await call(a.gateway, body, session);
        td = await call(a.direct, body, session);
      }
      if (i < WARMUP) continue;
      d.push(td.total);
      g.push(tg.total);
      added.push(tg.total - td.total);
      bytes = { direct: td.bytes, gateway: tg.bytes };
    }

    // (b) time to first chunk with a provider that holds the rest back
    const b = { direct: direct(held.value), gateway: viaGateway('held') };
    const firstD: number[] = [];
    const firstG: number[] = [];
    const totalG: number[] = [];
    for (let i = 0; i < 3 + TTFB_CALLS; i++) {
      const order = i % 2 ? (['direct', 'gateway'] as const) : (['gateway', 'direct'] as const);
      const r: Partial<Record<'direct' | 'gateway', Timing>> = {};
      for (const k of order) r[k] = await call(b[k], body, 'ses_bench_ttfb');
      if (i < 3) continue;
      firstD.push(r.direct!.first);
      firstG.push(r.gateway!.first);
      totalG.push(r.gateway!.total);
    }

    const sched1 = schedMs(gw.child.pid!);
    const gatewayCalls = WARMUP + CALLS + 3 + TTFB_CALLS;
    await stopAll([gw.child]);
    const addedP99 = percentile(added, 99);
    const ttfbAdded = median(firstG) - median(firstD);
    const okA = addedP99 <= 5;
    const okB = Math.max(...firstG) < HOLD_MS && ttfbAdded <= 5;
    const rows: Record<string, string> = {
      'direct call p50/p99/max (ms)': ms(d),
      'through proxy+gateway p50/p99/max': ms(g),
      'added per call p50/p99/max (ms)': `${ms(added)}  ${okA ? 'met' : 'NOT met'}`,
      'p50 ratio gateway / direct': `${(median(g) / median(d)).toFixed(2)}x`,
      'reply bytes direct / gateway': `${bytes.direct} / ${bytes.gateway} (request ${Buffer.byteLength(body)} B)`,
      'usage records in the gateway': `${records} of ${gatewayCalls} gateway calls`,
      [`first chunk, provider then holds ${HOLD_MS} ms`]: '',
      '  direct p50/p99/max (ms)': ms(firstD),
      '  through gateway p50/p99/max (ms)': `${ms(firstG)}  ${okB ? 'met' : 'NOT met'}`,
      '  added at p50 (ms)': ttfbAdded.toFixed(2),
      '  gateway: whole stream p50 (ms)': median(totalG).toFixed(1),
      'proxy+gateway CPU per call (ms)': ((sched1.run - sched0.run) / gatewayCalls).toFixed(3),
      'proxy+gateway waiting for a CPU (ms)': `${(sched1.wait - sched0.wait).toFixed(0)} in all (other work on CPU 0)`,
      "the person-is-active check (BENCH_ACTIVE_CHECK)": process.env.BENCH_ACTIVE_CHECK ?? 'on',
      'load average 1/5/15 min (2 cores)': loadAvg(),
    };
    return report(
      `LLM gateway: ${CALLS} streaming calls straight to a scripted model vs through a runtime's egress proxy (Unix socket) + the gateway, interleaved A/B; then ${TTFB_CALLS} calls whose provider holds the rest ${HOLD_MS} ms after the first chunk`,
      rows,
      { ok: okA && okB, target: `added p99 <= 5 ms per call; first chunk through the gateway < ${HOLD_MS} ms and p50 within 5 ms of direct` },
    );
  } finally {
    for (const a of agents) a.destroy();
    await stopAll();
    removeDir(dir);
  }
}
