import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { createRuntimeClient, type PtyConnection } from '../../src/core/runtime/runtime-client.js';
import { median, percentile, report } from './bench-utils.js';
import { setUp } from './in-process-serve.js';

/**
 * The workspace terminal: keystroke echo through the service on loopback, the browser's path
 * (a WebSocket to `aws serve`, which passes each keystroke to the runtime's pty over its Unix socket and
 * the echo back), against the same keystrokes sent straight to opencode's pty WebSocket on that Unix
 * socket (the baseline: what the service adds is the difference), in the same run, on the same shell
 * prompt. Each keystroke waits for its echo before the next (a person typing). Also serve's CPU (this
 * process: serve runs in it) while a terminal sits open and idle, against none open.
 * Target: echo p95 <= 50 ms through the service.
 */
const KEYS = process.env.AGENTWS_BENCH_QUICK ? 100 : 300;
const IDLE_MS = process.env.AGENTWS_BENCH_QUICK ? 10_000 : 20_000;

/** Times each keystroke until its echo comes back: `send` writes it, `echoed` resolves at the next output holding it. */
async function echoTimes(send: (s: string) => void, onOutput: (fn: (text: string) => void) => void): Promise<number[]> {
  let waiting: { ch: string; resolve: () => void } | null = null;
  onOutput((text) => {
    if (waiting && text.includes(waiting.ch)) {
      const w = waiting;
      waiting = null;
      w.resolve();
    }
  });
  const times: number[] = [];
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  for (let i = 0; i < KEYS; i++) {
    // A line of at most 40 keys, then cleared (Ctrl-U): the shell echoes each key as it is typed.
    if (i % 40 === 0) {
      send('\u0015');
      await new Promise((r) => setTimeout(r, 30));
    }
    const ch = letters[i % letters.length];
    const t0 = performance.now();
    await new Promise<void>((resolve, reject) => {
      waiting = { ch, resolve };
      send(ch);
      setTimeout(() => reject(new Error(`no echo of ${ch} in 5 s`)), 5000).unref();
    });
    times.push(performance.now() - t0);
  }
  send('\u0015');
  return times;
}

/** This process's CPU time (user + system) over `ms`, in ms of CPU per second. */
async function cpuOver(ms: number): Promise<number> {
  const a = process.cpuUsage();
  await new Promise((r) => setTimeout(r, ms));
  const d = process.cpuUsage(a);
  return (d.user + d.system) / 1000 / (ms / 1000);
}

export async function terminalBench(): Promise<boolean> {
  const s = await setUp('terminal');
  try {
    // The owner's runtime, started (a session does), and its pty reached straight on its Unix socket.
    const sessionRes = await fetch(`${s.url}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ title: 'terminal' }) });
    if (sessionRes.status !== 201) throw new Error(`session: ${sessionRes.status}`);
    const owner = { tenantId: s.tenantId, userId: s.ownerId };
    const handle = await s.opened.core.pool.acquire(owner);
    if (!handle.endpoint.socketPath) throw new Error('the runtime is not on a Unix socket');
    const direct = createRuntimeClient(handle);
    const pty = await direct.createPty();
    const conn: PtyConnection = await direct.connectPty(pty.id);
    const prompt = new Promise<void>((r) => conn.onOutput(() => r()));
    await prompt;
    await new Promise((r) => setTimeout(r, 300));

    // Through the service: the WebSocket the dashboard opens.
    const ws = new WebSocket(`${s.url.replace(/^http/, 'ws')}/v1/workspace/terminal?cols=120&rows=40`, { headers: { authorization: `Bearer ${s.token}` }, perMessageDeflate: false });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('unexpected-response', (_q, res) => reject(new Error(`terminal: ${res.statusCode}`)));
      ws.once('error', reject);
    });
    await new Promise<void>((r) => ws.once('message', () => r()));
    await new Promise((r) => setTimeout(r, 300));
    const viaService = (fn: (text: string) => void) => ws.on('message', (d, binary) => !binary && fn(d.toString()));

    // Interleaved rounds, so both meet the same machine.
    const service: number[] = [];
    const baseline: number[] = [];
    for (let round = 0; round < 3; round++) {
      baseline.push(...(await echoTimes((c) => conn.write(c), (fn) => conn.onOutput(fn))));
      service.push(...(await echoTimes((c) => ws.send(c), viaService)));
    }

    // What the typing left (its garbage, the runtime's events) settles first: the windows compare idle with idle.
    await new Promise((r) => setTimeout(r, 5000));
    const idleWith = await cpuOver(IDLE_MS);
    ws.close(1000);
    conn.close();
    await direct.removePty(pty.id);
    await new Promise((r) => setTimeout(r, 5000));
    const idleWithout = await cpuOver(IDLE_MS);

    const p95 = percentile(service, 95);
    const b95 = percentile(baseline, 95);
    return report(
      'terminal: keystroke echo',
      {
        keystrokes: `${service.length} through the service, ${baseline.length} straight to the pty`,
        'service: median / p95 / max (ms)': `${median(service).toFixed(2)} / ${p95.toFixed(2)} / ${Math.max(...service).toFixed(2)}`,
        'pty socket: median / p95 / max (ms)': `${median(baseline).toFixed(2)} / ${b95.toFixed(2)} / ${Math.max(...baseline).toFixed(2)}`,
        'service adds (median, ms)': (median(service) - median(baseline)).toFixed(2),
        'ratio p95 service / pty': `${(p95 / b95).toFixed(2)}x`,
        'serve CPU, a terminal idle (ms/s)': idleWith.toFixed(2),
        'serve CPU, none open (ms/s)': idleWithout.toFixed(2),
      },
      { ok: p95 <= 50, target: 'echo p95 <= 50 ms through the service' },
    );
  } finally {
    await s.close();
  }
}
