import { performance } from 'node:perf_hooks';
import { percentile, median, report } from './bench-utils.js';
import { loadAvg } from './agent-bench-utils.js';
import { newSession, openStream, post, setUp } from './in-process-serve.js';

/**
 * Stopping a turn: a turn streaming a long answer is stopped through the API; measured from the
 * stop request to the stream's `turn.stopped`, and to the runtime's own end of the turn (`session.idle`),
 * then the next prompt's first text. Baselines in the same run, on the same runtime and session: opencode's
 * own abort called directly on the runtime (the service's runtime client, as the stop route calls it) up
 * to the same `session.idle`, and a prompt's first text when the turn before it ended normally (and, to
 * tell the runtime's part from the service's, after opencode's own abort). Target:
 * stop -> "stopped" p95 <= 500 ms; the next prompt's first text within 1.5x its baseline (p50).
 * AGENTWS_BENCH_QUICK=1: five rounds instead of ten.
 */
const ROUNDS = process.env.AGENTWS_BENCH_QUICK ? 5 : 10;
const LONG = Array.from({ length: 400 }, (_, i) => `word${i}`).join(' ');

export async function stopBench(): Promise<boolean> {
  const s = await setUp('stop');
  try {
    const sessionId = await newSession(s, 'stop bench');
    const stream = await openStream(`${s.url}/v1/sessions/${sessionId}/events`, s.token);
    const after = (from: number, pred: (d: any) => boolean, timeoutMs = 60_000) =>
      stream.until(() => stream.events.slice(from).some((e) => pred(e.data)), timeoutMs).then(() => stream.events.slice(from).find((e) => pred(e.data))!);
    const prompt = async (text: string) => {
      const r = await post(s, `/v1/sessions/${sessionId}/prompt`, { text, agent: 'build' });
      if (r.status !== 202) throw new Error(`prompt: ${r.status} ${JSON.stringify(r.json)}`);
    };
    /** A prompt with a short answer: from the request to its first text on the stream, ms; waits for its end. */
    const shortTurn = async (): Promise<number> => {
      s.llm.script([{ text: 'A short answer.' }]);
      const from = stream.events.length;
      const t0 = performance.now();
      await prompt('answer briefly');
      const first = await after(from, (d) => d.type === 'message.part.delta');
      await after(from, (d) => d.type === 'session.idle');
      return first.at - t0;
    };
    /** A prompt whose answer streams for seconds: returns once its text has been streaming a moment. */
    const longTurn = async (): Promise<number> => {
      s.llm.script([{ text: LONG, chunkDelayMs: 20 }]);
      const from = stream.events.length;
      await prompt('write at length');
      await after(from, (d) => d.type === 'message.part.delta');
      await new Promise((r) => setTimeout(r, 200));
      return stream.events.length;
    };

    await shortTurn();
    const upstreamId = (await s.opened.db.query<{ upstreamId: string }>(`select upstream_id as "upstreamId" from agent_sessions where id = $1`, [sessionId])).rows[0].upstreamId;
    const client = await s.opened.core.pool.runningClient({ tenantId: s.tenantId, userId: s.ownerId });
    if (!client) throw new Error('the runtime is not running');

    const toStopped: number[] = [];
    const stopToIdle: number[] = [];
    const stopAnswer: number[] = [];
    const abortToIdle: number[] = [];
    const firstAfterStop: number[] = [];
    const firstBaseline: number[] = [];
    const firstAfterAbort: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Through the service's route.
      let from = await longTurn();
      let t0 = performance.now();
      const r = await post(s, `/v1/sessions/${sessionId}/stop`, {});
      stopAnswer.push(performance.now() - t0);
      if (!r.json?.stopped) throw new Error(`stop: ${JSON.stringify(r.json)}`);
      toStopped.push((await after(from, (d) => d.type === 'turn.stopped')).at - t0);
      stopToIdle.push((await after(from, (d) => d.type === 'session.idle')).at - t0);
      firstAfterStop.push(await shortTurn());
      // Baseline: a prompt after a turn that ended normally.
      firstBaseline.push(await shortTurn());
      // Baseline: opencode's own abort, straight to the runtime.
      from = await longTurn();
      t0 = performance.now();
      await client.abort(upstreamId);
      abortToIdle.push((await after(from, (d) => d.type === 'session.idle')).at - t0);
      firstAfterAbort.push(await shortTurn());
    }
    stream.close();

    const pp = (xs: number[]) => `${median(xs).toFixed(1)} / ${percentile(xs, 95).toFixed(1)} ms`;
    const okStop = percentile(toStopped, 95) <= 500;
    const okNext = median(firstAfterStop) <= 1.5 * median(firstBaseline);
    return report(
      `stop a turn: ${ROUNDS} turns streaming a long answer stopped through POST /v1/sessions/:id/stop (in-process serve, PostgreSQL, the user's sandboxed runtime, scripted model)`,
      {
        'stop request -> stream "turn.stopped" p50/p95': `${pp(toStopped)}  ${okStop ? 'met' : 'NOT met'}`,
        'stop request -> its 200 answer p50/p95': pp(stopAnswer),
        'stop request -> the runtime\'s end of the turn (session.idle) p50/p95': pp(stopToIdle),
        'baseline: opencode abort called directly -> session.idle p50/p95': pp(abortToIdle),
        'next prompt -> its first text, after a stop p50/p95': `${pp(firstAfterStop)}  ${okNext ? 'met' : 'NOT met'}`,
        'baseline: a prompt -> its first text, after a turn that ended normally p50/p95': pp(firstBaseline),
        'baseline: a prompt -> its first text, after opencode\'s own abort p50/p95': pp(firstAfterAbort),
        'next prompt after a stop / baseline (p50)': `${(median(firstAfterStop) / median(firstBaseline)).toFixed(2)}x`,
        'next prompt after a stop / after opencode\'s own abort (p50)': `${(median(firstAfterStop) / median(firstAfterAbort)).toFixed(2)}x`,
        'load average 1/5/15 min (2 cores)': loadAvg(),
      },
      { ok: okStop && okNext, target: 'stop -> "stopped" p95 <= 500 ms; the next prompt\'s first text <= 1.5x its baseline (p50)' },
    );
  } finally {
    await s.close();
  }
}
