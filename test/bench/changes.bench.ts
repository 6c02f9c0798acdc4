import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { workspaceDir } from '../../src/lib/data-paths.js';
import { changes, snapshot } from '../../src/core/runtime/host/workspace-snapshots.js';
import type { FakeChatRequest, FakeStep } from '../fixtures/fake-llm.js';
import { loadAvg, removeDir } from './agent-bench-utils.js';
import { median, percentile, report } from './bench-utils.js';
import { openStream, setUp } from './in-process-serve.js';

/**
 * What the service's snapshots cost, and how fast the service answers what changed.
 *
 * The workspace: 1,000 text files, 50 MB, in 20 folders. A turn is 50 tool calls, one per model step: a
 * read and an edit of each of 20 files, and 10 more reads.
 *
 * 1. The snapshot itself, on the host (host/workspace-snapshots.ts): the first one (every file read and
 *    stored), then one after a turn's 20 edits (the cache: only changed files are read), its CPU; the diff
 *    of a turn; the store on disk.
 * 2. Through `aws serve` in process, with the owner's real sandboxed runtime: turns alternating between
 *    snapshots on and off (the same serve and runtime; the switch is the service's), turn time and serve's
 *    CPU per turn (the snapshots run in serve), serve's idle CPU; then GET /v1/sessions/:id/changes for one
 *    turn (20 files) and for the whole session. Targets: turn time on <= 1.1x off, idle CPU unchanged; the
 *    turn's p95 <= 300 ms, the session's <= 1 s.
 * AGENTWS_BENCH_QUICK=1: two turns each instead of three.
 */
const QUICK = !!process.env.AGENTWS_BENCH_QUICK;
const TURNS = QUICK ? 2 : 3;
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

const du = (dir: string) => Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
const mb = (b: number) => `${(b / 1024 ** 2).toFixed(1)} MB`;
const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;

/** The snapshot on the host: cold, then after each turn's 20 edits; a turn's diff; the store's size. */
async function hostCost(fixture: string, dir: string): Promise<{ rows: Record<string, string>; ok: boolean }> {
  const ws = join(dir, 'host-ws');
  const store = join(dir, 'host-store', 'snapshots.git');
  execFileSync('cp', ['-a', fixture, ws]);
  let c0 = process.cpuUsage();
  let t0 = performance.now();
  let prev = (await snapshot(ws, store, [])).tree;
  const cold = { ms: performance.now() - t0, cpu: cpuMs(process.cpuUsage(c0)) };
  // Files edited more than RACY_MS ago count as unchanged from the cache, as in a real turn.
  await new Promise((r) => setTimeout(r, 2100));
  const warm: Array<{ ms: number; cpu: number; read: number }> = [];
  const diffs: number[] = [];
  for (let t = 1; t <= 5; t++) {
    for (let k = 0; k < EDITED; k++) {
      const f = fileOf(ws, (t * EDITED + k) % FILES);
      writeFileSync(f, readFileSync(f, 'utf8').replace(/^\/\/ file (\d+) rev \d+/, `// file $1 rev ${t}`));
    }
    await new Promise((r) => setTimeout(r, 2100));
    c0 = process.cpuUsage();
    t0 = performance.now();
    const r = await snapshot(ws, store, []);
    warm.push({ ms: performance.now() - t0, cpu: cpuMs(process.cpuUsage(c0)), read: r.read });
    for (let i = 0; i < 5; i++) {
      t0 = performance.now();
      const c = await changes(store, prev, r.tree, { patch: true });
      diffs.push(performance.now() - t0);
      if (c.files.length !== EDITED) throw new Error(`the host diff lists ${c.files.length} files, not ${EDITED}`);
    }
    prev = r.tree;
  }
  const rows = {
    'first snapshot (every file read and stored)': `${Math.round(cold.ms)} ms, CPU ${Math.round(cold.cpu)} ms`,
    'snapshot after a turn of 20 edits': `median ${Math.round(median(warm.map((w) => w.ms)))} ms (${warm.map((w) => Math.round(w.ms)).join(', ')}), CPU ${Math.round(median(warm.map((w) => w.cpu)))} ms, ${warm[0].read} files read`,
    'diff of a turn (20 files, with patches)': `p50 ${Math.round(median(diffs))} ms, p95 ${Math.round(percentile(diffs, 95))} ms`,
    'snapshot store on disk': `${mb(du(store))} after 6 snapshots (the workspace: ${mb(du(fixture))})`,
  };
  return { rows, ok: true };
}

async function serviceLatency(fixture: string): Promise<{ rows: Record<string, string>; ok: boolean }> {
  const s = await setUp('changes', { AGENTWS_RUNTIME_ASK_TOOLS: '' });
  s.llm.respond(respond);
  try {
    execFileSync('cp', ['-a', `${fixture}/.`, mkdirp(workspaceDir(s.config.dataDir, { tenantId: s.tenantId, userId: s.ownerId }))]);
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${s.url}${path}`, { method, headers: { authorization: `Bearer ${s.token}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
    const id = ((await (await call('POST', '/v1/sessions', { title: 'changes bench' })).json()) as { sessionId: string }).sessionId;
    const snaps = s.opened.core.turnSnapshots;
    const turn = async (t: number, sessionId: string) => {
      const stream = await openStream(`${s.url}/v1/sessions/${sessionId}/events`, s.token);
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const res = await call('POST', `/v1/sessions/${sessionId}/prompt`, { text: `bench turn ${t} at /workspace`, agent: 'build' });
      if (res.status !== 202) throw new Error(`prompt: ${res.status} ${await res.text()}`);
      const end = await stream.until((d) => d.type === 'session.idle' || d.type === 'session.error', 300_000);
      stream.close();
      if (end.data.type === 'session.error') throw new Error(`turn ${t}: ${JSON.stringify(end.data.properties)}`);
      const ms = performance.now() - t0;
      // The after-snapshot runs in the background; its CPU is the turn's.
      await snaps.settled(sessionId);
      return { ms, cpu: cpuMs(process.cpuUsage(c0)) };
    };
    // A first turn, not counted: the runtime starts, and the first snapshot reads every file.
    const firstT0 = performance.now();
    await turn(100, id);
    const firstMs = performance.now() - firstT0;
    // Then turns alternating between snapshots on and off, in a session of their own for off.
    const offId = ((await (await call('POST', '/v1/sessions', { title: 'changes bench off' })).json()) as { sessionId: string }).sessionId;
    // The off session gets a first turn too (not counted): both sessions then carry the same history, which
    // the runtime reads at every step.
    snaps.enabled = false;
    await turn(99, offId);
    const on: Array<{ ms: number; cpu: number }> = [];
    const off: Array<{ ms: number; cpu: number }> = [];
    for (let t = 1; t <= TURNS; t++) {
      for (const mode of t % 2 ? ['on', 'off'] : ['off', 'on']) {
        snaps.enabled = mode === 'on';
        if (mode === 'on') on.push(await turn(t, id));
        else off.push(await turn(t + 25, offId));
      }
    }
    snaps.enabled = true;
    // Idle: serve's CPU over 20 s after a 3 s settle (snapshots run at turns only: no timer).
    await new Promise((r) => setTimeout(r, 3000));
    const idle0 = process.cpuUsage();
    await new Promise((r) => setTimeout(r, 20_000));
    const idleCpu = cpuMs(process.cpuUsage(idle0)) / 20_000;
    const store = join(s.config.dataDir, 'runtimes', s.ownerId, 'snapshots.git');
    const pairs = on.map((x, i) => x.ms / off[i].ms);
    const ratio = median(pairs);
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
    let session = await timed(`/v1/sessions/${id}/changes`, 1);
    if (session.body.turns.some((t: any) => t.files !== EDITED)) {
      const messages = (await (await call('GET', `/v1/sessions/${id}/messages`)).json()) as { messages: unknown[] };
      throw new Error(`the turns changed ${JSON.stringify(session.body.turns.map((t: any) => t.files))} files, not ${EDITED} each; the last messages: ${JSON.stringify(messages.messages.slice(-3)).slice(0, 3000)}`);
    }
    const last = session.body.turns.at(-1).messageId as string;
    const one = await timed(`/v1/sessions/${id}/changes?messageId=${last}`, 30);
    session = await timed(`/v1/sessions/${id}/changes`, 15);
    if (one.body.files.length !== EDITED) throw new Error(`the turn lists ${one.body.files.length} files, not ${EDITED}`);
    const turnP95 = percentile(one.times, 95);
    const sessionP95 = percentile(session.times, 95);
    const rows = {
      'first turn (runtime start, first snapshot)': `${Math.round(firstMs)} ms`,
      'turn of 50 tool calls, snapshots on': `median ${Math.round(median(on.map((x) => x.ms)))} ms (${on.map((x) => Math.round(x.ms)).join(', ')}); serve CPU ${Math.round(median(on.map((x) => x.cpu)))} ms a turn`,
      'turn of 50 tool calls, snapshots off': `median ${Math.round(median(off.map((x) => x.ms)))} ms (${off.map((x) => Math.round(x.ms)).join(', ')}); serve CPU ${Math.round(median(off.map((x) => x.cpu)))} ms a turn`,
      'turn time on / off': `${ratio.toFixed(2)}x (median of the pairs: ${pairs.map((p) => p.toFixed(2)).join(', ')})`,
      'serve CPU a turn on / off': `${(median(on.map((x) => x.cpu)) / median(off.map((x) => x.cpu))).toFixed(2)}x`,
      'serve idle CPU (20 s, snapshots on)': `${(idleCpu * 100).toFixed(2)} % of a core`,
      'snapshot store on disk': `${mb(du(store))} after ${TURNS + 1} turns with snapshots`,
      'changes of one turn (20 files)': `p50 ${Math.round(median(one.times))} ms, p95 ${Math.round(turnP95)} ms (30 requests)`,
      'changes of the session (turns, files)': `p50 ${Math.round(median(session.times))} ms, p95 ${Math.round(sessionP95)} ms, max ${Math.round(Math.max(...session.times))} ms (15 requests; ${session.body.turns.length} turns, ${session.body.totals.files} files +${session.body.totals.additions} -${session.body.totals.deletions})`,
    };
    return { rows, ok: ratio <= 1.1 && turnP95 <= 300 && sessionP95 <= 1000 };
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
    // AGENTWS_BENCH_CHANGES=host|service: one part only.
    const only = process.env.AGENTWS_BENCH_CHANGES;
    let ok = true;
    if (only !== 'service') {
      const load0 = loadAvg();
      const a = await hostCost(fixture, dir);
      ok = report(`changes: the service's snapshot on the host (1,000 files of ${FILE_BYTES / 1024} KB)`, { ...a.rows, 'load average before / after': `${load0} / ${loadAvg()}` }, { ok: a.ok, target: 'a snapshot per turn end, ~0.1 s' }) && ok;
    }
    if (only !== 'host') {
      const load0 = loadAvg();
      const b = await serviceLatency(fixture);
      ok = report(`changes: snapshots on against off through the service (a turn of 50 tool calls, 1,000 files of ${FILE_BYTES / 1024} KB)`, { ...b.rows, 'load average before / after': `${load0} / ${loadAvg()}` }, { ok: b.ok, target: "turn time on <= 1.1x off; one turn's changes (20 files) p95 <= 300 ms, the session's <= 1 s" }) && ok;
    }
    return ok;
  } finally {
    removeDir(dir);
  }
}
