import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { workspaceDir } from '../../src/lib/data-paths.js';
import { processStatFields } from '../../src/lib/process-state.js';
import { requestRuntime } from '../../src/core/runtime/host/runtime-transport.js';
import type { FakeChatRequest, FakeStep } from '../fixtures/fake-llm.js';
import { startFakeLlm } from '../fixtures/fake-llm.js';
import { loadAvg, removeDir, startOpencode, stopAll } from './agent-bench-utils.js';
import { median, percentile, report } from './bench-utils.js';
import { openStream, setUp } from './in-process-serve.js';

/**
 * What opencode's snapshots cost, and how fast the service answers what changed (issue 38).
 *
 * The workspace: a repository of 1,000 text files, 50 MB, made a git repository with no commit (what the
 * runtime makes of a workspace that is not one: the snapshots then copy every file's blob, the most disk
 * they can take). A turn is 50 tool calls, one per model step (each step is a snapshot and a patch): a
 * read and an edit of each of 20 files, and 10 more reads.
 *
 * 1. The runtime's cost: two runtimes, snapshots on and off (the binary the service ships, outside the
 *    sandbox: git runs the same inside), the same scripted model, turns alternating between them: turn
 *    time, CPU of the runtime (with the git processes it ran) per turn and while idle, and the disk of the
 *    snapshot repository. Target: turn time within 1.1x, idle CPU unchanged.
 * 2. The service: the same turns through `aws serve` in process (the owner's real sandboxed runtime), then
 *    GET /v1/sessions/:id/changes for one turn (20 files) and for the whole session. Targets: the turn's
 *    p95 <= 300 ms, the session's <= 1 s.
 * AGENTWS_BENCH_QUICK=1: three turns a runtime instead of five.
 */
const QUICK = !!process.env.AGENTWS_BENCH_QUICK;
const TURNS = QUICK ? 3 : 5;
const FILES = 1000;
/** AGENTWS_BENCH_CHANGES_FILE_KB: another file size (what the cost grows with), e.g. 5 for a 5 MB workspace. */
const FILE_BYTES = Number(process.env.AGENTWS_BENCH_CHANGES_FILE_KB || 50) * 1024;
const EDITED = 20;

/** The fixture: 1,000 files of ~50 KB in 20 folders, each starting with a line a turn edits. */
function makeRepository(dir: string): void {
  for (let i = 0; i < FILES; i++) {
    const folder = join(dir, `pkg${i % 20}`);
    mkdirSync(folder, { recursive: true });
    const lines = [`// file ${i} rev 0`];
    let size = lines[0].length;
    while (size < FILE_BYTES) {
      const line = `export const v${lines.length} = "${randomBytes(24).toString('hex')}";`;
      lines.push(line);
      size += line.length + 1;
    }
    writeFileSync(join(folder, `mod${i}.ts`), `${lines.join('\n')}\n`);
  }
}

const fileOf = (root: string, i: number) => `${root}/pkg${i % 20}/mod${i}.ts`;

/** The scripted model's step for a turn "bench turn <t> at <root>": read and edit 20 files, 10 more reads, then an answer. */
function respond(req: FakeChatRequest): FakeStep | undefined {
  const m = /^bench turn (\d+) at (\S+)$/.exec(req.lastUser.trim());
  if (!m) return undefined;
  const t = Number(m[1]);
  const root = m[2];
  // Steps of this turn: the tool results since its prompt (a session's earlier turns come before it).
  const messages = req.body.messages as Array<{ role: string }>;
  const step = messages.slice(messages.map((x) => x.role).lastIndexOf('user')).filter((x) => x.role === 'tool').length;
  const file = (k: number) => fileOf(root, (t * EDITED + k) % FILES);
  if (step < 2 * EDITED) {
    const k = Math.floor(step / 2);
    return step % 2 === 0
      ? { toolCall: { name: 'read', arguments: { filePath: file(k), limit: 5 } } }
      : { toolCall: { name: 'edit', arguments: { filePath: file(k), oldString: `// file ${(t * EDITED + k) % FILES} rev 0`, newString: `// file ${(t * EDITED + k) % FILES} rev 1 (turn ${t})` } } };
  }
  if (step < 50) return { toolCall: { name: 'read', arguments: { filePath: fileOf(root, (t * 37 + step * 11 + 500) % FILES), limit: 5 } } };
  return { text: `done turn ${t}` };
}

/** CPU (ms) of a process and the children it has reaped (git runs as the runtime's children). */
function cpuWithChildren(pid: number): number {
  const f = processStatFields(pid);
  return f ? ((Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 1000) / 100 : 0;
}

const du = (dir: string) => Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
const mb = (b: number) => `${(b / 1024 ** 2).toFixed(1)} MB`;

function modelConfig(home: string, baseURL: string, snapshot: boolean): void {
  const dir = join(home, '.config', 'opencode');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'opencode.json'),
    JSON.stringify({
      provider: { scripted: { npm: '@ai-sdk/openai-compatible', name: 'scripted', options: { baseURL, apiKey: 'sk-scripted' }, models: { 'fake-model': { name: 'fake-model', limit: { context: 200_000, output: 4096 } } } } },
      enabled_providers: ['scripted'],
      model: 'scripted/fake-model',
      snapshot,
      permission: { external_directory: 'deny' },
      share: 'disabled',
      autoupdate: false,
    }),
  );
}

/** One turn in a bare runtime: a session and a prompt, answered in full. */
async function bareTurn(ep: { url: string; authorization: string }, directory: string, t: number): Promise<number> {
  const q = `?directory=${encodeURIComponent(directory)}`;
  const s = await requestRuntime(ep, 'POST', `/session${q}`, { body: {} });
  const id = JSON.parse(s.text).id as string;
  const t0 = performance.now();
  const r = await requestRuntime(ep, 'POST', `/session/${id}/message${q}`, { body: { parts: [{ type: 'text', text: `bench turn ${t} at ${directory}` }], model: { providerID: 'scripted', modelID: 'fake-model' } }, timeoutMs: 300_000 });
  if (r.status !== 200) throw new Error(`turn: ${r.status} ${r.text.slice(0, 300)}`);
  const ms = performance.now() - t0;
  const answer = JSON.parse(r.text) as { parts: Array<{ type: string; text?: string }> };
  if (!answer.parts.some((p) => p.text === `done turn ${t}`)) throw new Error(`turn ${t} did not end with its answer: ${r.text.slice(0, 300)}`);
  return ms;
}

async function runtimeCost(fixture: string, dir: string): Promise<{ rows: Record<string, string>; ok: boolean }> {
  const llm = await startFakeLlm();
  llm.respond(respond);
  const variants = [
    { name: 'on', snapshot: true, turns: [] as number[], cpu: [] as number[] },
    { name: 'off', snapshot: false, turns: [] as number[], cpu: [] as number[] },
  ];
  try {
    const started = [];
    for (const v of variants) {
      const runDir = join(dir, v.name);
      const workspace = join(runDir, 'workspace');
      mkdirSync(runDir, { recursive: true });
      execFileSync('cp', ['-a', fixture, workspace]);
      execFileSync('git', ['init', '-q', '--template=', workspace]);
      modelConfig(join(runDir, 'home'), `${llm.url}/v1`, v.snapshot);
      const oc = await startOpencode(runDir);
      started.push({ v, oc, workspace, home: join(runDir, 'home') });
    }
    // A first turn each, not counted: the snapshot repository is made and every file added at the first step.
    const first: Record<string, number> = {};
    for (const s of started) first[s.v.name] = await bareTurn(s.oc, s.workspace, 0);
    for (let t = 1; t <= TURNS; t++) {
      const order = t % 2 ? started : [...started].reverse();
      for (const s of order) {
        const cpu0 = cpuWithChildren(s.oc.child.pid!);
        s.v.turns.push(await bareTurn(s.oc, s.workspace, t));
        s.v.cpu.push(cpuWithChildren(s.oc.child.pid!) - cpu0);
      }
    }
    // Idle: both at once, 20 s after a 3 s settle.
    await new Promise((r) => setTimeout(r, 3000));
    const idle0 = started.map((s) => cpuWithChildren(s.oc.child.pid!));
    await new Promise((r) => setTimeout(r, 20_000));
    const idle = started.map((s, i) => (cpuWithChildren(s.oc.child.pid!) - idle0[i]) / 20_000);
    const snapshotDisk = du(join(started[0].home, '.local', 'share', 'opencode', 'snapshot'));
    const [on, off] = variants;
    const pairs = on.turns.map((x, i) => x / off.turns[i]);
    const ratio = median(pairs);
    const rows = {
      'first turn (snapshot repository made)': `on ${Math.round(first.on)} ms, off ${Math.round(first.off)} ms`,
      'turn of 50 tool calls, snapshots on': `median ${Math.round(median(on.turns))} ms (${on.turns.map(Math.round).join(', ')}); CPU ${Math.round(median(on.cpu))} ms a turn`,
      'turn of 50 tool calls, snapshots off': `median ${Math.round(median(off.turns))} ms (${off.turns.map(Math.round).join(', ')}); CPU ${Math.round(median(off.cpu))} ms a turn`,
      'turn time on / off': `${ratio.toFixed(2)}x (median of the pairs: ${pairs.map((p) => p.toFixed(2)).join(', ')})`,
      'CPU a turn on / off': `${(median(on.cpu) / median(off.cpu)).toFixed(2)}x`,
      'idle CPU (20 s)': `on ${(idle[0] * 100).toFixed(2)} % of a core, off ${(idle[1] * 100).toFixed(2)} %`,
      'snapshot repository on disk': `${mb(snapshotDisk)} after ${TURNS + 1} turns (the workspace: ${mb(du(fixture))})`,
    };
    return { rows, ok: ratio <= 1.1 && idle[0] <= idle[1] + 0.005 };
  } finally {
    await stopAll();
    await llm.close();
  }
}

async function serviceLatency(fixture: string): Promise<{ rows: Record<string, string>; ok: boolean }> {
  const s = await setUp('changes', { AGENTWS_RUNTIME_ASK_TOOLS: '' });
  s.llm.respond(respond);
  try {
    execFileSync('cp', ['-a', `${fixture}/.`, mkdirp(workspaceDir(s.config.dataDir, { tenantId: s.tenantId, userId: s.ownerId }))]);
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${s.url}${path}`, { method, headers: { authorization: `Bearer ${s.token}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
    const id = ((await (await call('POST', '/v1/sessions', { title: 'changes bench' })).json()) as { sessionId: string }).sessionId;
    const turnTimes: number[] = [];
    for (let t = 1; t <= 3; t++) {
      const stream = await openStream(`${s.url}/v1/sessions/${id}/events`, s.token);
      const t0 = performance.now();
      const res = await call('POST', `/v1/sessions/${id}/prompt`, { text: `bench turn ${t} at /workspace`, agent: 'build' });
      if (res.status !== 202) throw new Error(`prompt: ${res.status} ${await res.text()}`);
      const end = await stream.until((d) => d.type === 'session.idle' || d.type === 'session.error', 300_000);
      stream.close();
      if (end.data.type === 'session.error') throw new Error(`turn ${t}: ${JSON.stringify(end.data.properties)}`);
      turnTimes.push(performance.now() - t0);
    }
    const timed = async (path: string, n: number) => {
      const out: number[] = [];
      let body: any;
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        const r = await call('GET', path);
        body = await r.json();
        out.push(performance.now() - t0);
        if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(body)}`);
      }
      return { times: out, body };
    };
    // The turn's changes are recorded as it ends (the runtime's summary): wait for them.
    let session = await timed(`/v1/sessions/${id}/changes`, 1);
    for (let i = 0; i < 300 && session.body.turns.some((t: any) => t.files !== EDITED); i++) {
      await new Promise((r) => setTimeout(r, 200));
      session = await timed(`/v1/sessions/${id}/changes`, 1);
    }
    if (session.body.turns.some((t: any) => t.files !== EDITED)) {
      const messages = (await (await call('GET', `/v1/sessions/${id}/messages`)).json()) as { messages: unknown[] };
      throw new Error(`the turns changed ${JSON.stringify(session.body.turns.map((t: any) => t.files))} files, not ${EDITED} each; the last messages: ${JSON.stringify(messages.messages.slice(-3)).slice(0, 3000)}`);
    }
    const last = session.body.turns.at(-1).messageId as string;
    const turn = await timed(`/v1/sessions/${id}/changes?messageId=${last}`, 30);
    session = await timed(`/v1/sessions/${id}/changes`, 15);
    if (turn.body.files.length !== EDITED) throw new Error(`the turn lists ${turn.body.files.length} files, not ${EDITED}`);
    const turnP95 = percentile(turn.times, 95);
    const sessionP95 = percentile(session.times, 95);
    const rows = {
      'turns through the service': `${turnTimes.map(Math.round).join(', ')} ms (the first starts the runtime)`,
      'changes of one turn (20 files)': `p50 ${Math.round(median(turn.times))} ms, p95 ${Math.round(turnP95)} ms (30 requests)`,
      'changes of the session (3 turns, 60 files)': `p50 ${Math.round(median(session.times))} ms, p95 ${Math.round(sessionP95)} ms, max ${Math.round(Math.max(...session.times))} ms (15 requests; ${session.body.totals.files} files +${session.body.totals.additions} -${session.body.totals.deletions})`,
    };
    return { rows, ok: turnP95 <= 300 && sessionP95 <= 1000 };
  } finally {
    s.llm.respond(null);
    await s.close();
  }
}

function mkdirp(dir: string): string {
  mkdirSync(dir, { recursive: true });
  return dir;
}

export async function changesBench(): Promise<boolean> {
  const dir = mkdtempSync(join(tmpdir(), 'agentws-bench-changes-'));
  try {
    const fixture = join(dir, 'fixture');
    makeRepository(fixture);
    // AGENTWS_BENCH_CHANGES=runtime|service: one part only.
    const only = process.env.AGENTWS_BENCH_CHANGES;
    let ok = true;
    if (only !== 'service') {
      const load0 = loadAvg();
      const a = await runtimeCost(fixture, dir);
      ok = report(`changes: opencode snapshots on against off (a turn of 50 tool calls, 1,000 files of ${FILE_BYTES / 1024} KB)`, { ...a.rows, 'load average before / after': `${load0} / ${loadAvg()}` }, { ok: a.ok, target: 'turn time on <= 1.1x off, idle CPU unchanged' }) && ok;
    }
    if (only !== 'runtime') {
      const load0 = loadAvg();
      const b = await serviceLatency(fixture);
      ok = report('changes: what changed, through the service', { ...b.rows, 'load average before / after': `${load0} / ${loadAvg()}` }, { ok: b.ok, target: "one turn's changes (20 files) p95 <= 300 ms, the session's <= 1 s" }) && ok;
    }
    return ok;
  } finally {
    removeDir(dir);
  }
}
