import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/database.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createTurnEvents } from '../../src/core/sessions/turn-events.js';
import type { AgentMemoriesService } from '../../src/core/memories/agent-memories.service.js';
import { emptyPermissions } from '../../src/kernel/permissions.js';
import { createTurnRunner, TURN_MEMORIES } from '../../src/core/sessions/turn-runner.js';
import type { JobQueue } from '../../src/core/jobs/job-queue.js';
import { systemCtx } from '../../src/kernel/context.js';

/**
 * The turn runner's memory injection with a stand-in runtime (a loopback HTTP server recording the
 * prompt it is sent): the recalled memories go as one synthetic part after the user's; a recall that
 * fails or hangs costs the turn its memories, never the turn.
 */
describe('turn runner: memories at the start of a turn', () => {
  let server: http.Server;
  let url = '';
  let dir = '';
  const prompts: any[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agentws-turn-mem-'));
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        if (req.method === 'POST' && /\/prompt_async/.test(req.url ?? '')) {
          prompts.push(JSON.parse(body));
          return void res.writeHead(204).end();
        }
        // The prompt, stored (the runner waits for it before the session's next turn).
        if (req.method === 'GET' && /\/message\/msg_1(\?|$)/.test(req.url ?? '')) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        res.writeHead(404).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  function runner(memories: Pick<AgentMemoriesService, 'recallForTurn'>, extra: Partial<Parameters<typeof createTurnRunner>[0]> = {}) {
    const finished: string[] = [];
    const turn = {
      id: 't1', tenantId: 'ten', sessionId: 's1', userId: 'u1', messageId: 'msg_1', agent: 'build', parts: [{ id: 'prt_1', type: 'text', text: 'how do I indent Go?' }], tools: null, model: null,
      status: 'sending' as const, attempts: 1, previousStatus: 'queued' as const, previousWorker: null, handingAt: null, createdAt: new Date(),
    };
    const r = createTurnRunner({
      db: { transaction: (fn: (tx: unknown) => Promise<unknown>) => fn({}) } as unknown as Database,
      events: createTurnEvents(silentLogger),
      repo: {
        byId: async () => ({ id: 's1', tenantId: 'ten', ownerId: 'u1', title: 't', upstreamId: 'ses_1', directory: join(dir, 'ws'), systemPrompt: null, model: null }) as never,
        bindUpstream: async () => 'ses_1',
        rebindUpstream: async () => 'ses_1',
      },
      turnsRepo: {
        beginAttempt: async () => turn,
        finishTurn: async (_q, _t, _id, status) => void finished.push(status),
        waitTurn: async () => true,
        loseTurns: async () => [],
        loseTurn: async () => false,
        loseOrphanedTurns: async () => [],
        endUserTurns: async () => 0,
        claimHandOver: async () => true,
        handedOver: async () => {},
        handOverFailed: async () => {},
        earlierPending: async () => false,
        parkTurn: async () => false,
        handOn: async () => null,
        handOnAll: async () => [],
        attemptsOf: async () => [],
        failPendingTurn: async () => null,
        recordEndEvents: async () => {},
      },
      runtime: { resolveTurnModel: async () => ({ providerID: 'p', modelID: 'm', ref: 'p/m', source: 'default' as const }), ensureConfigured: async () => {} },
      pool: { acquire: async () => ({ endpoint: { url, authorization: 'Basic x' }, directory: '/workspace' }) },
      queue: {} as JobQueue,
      jobs: { activeJobs: async () => [], takeBack: async () => false },
      worker: 'test',
      workerState: () => 'unknown',
      streams: { publish: async () => {} },
      permissionsOf: async () => emptyPermissions(),
      memories,
      log: silentLogger,
      ...extra,
    });
    return { run: () => r.runTurn(systemCtx(silentLogger), { turnId: 't1' }), finished };
  }

  it('adds the recalled memories as one synthetic text part after the prompt, recalled for the prompt text', async () => {
    const asked: unknown[] = [];
    const { run, finished } = runner({
      recallForTurn: async (owner, prompt, options) => {
        asked.push([owner, prompt, options]);
        return { memories: [{ id: 'm1', kind: 'preference', content: 'tabs, always', visibility: 'private', createdAt: new Date('2026-11-20T00:00:00Z'), truncated: false }], searchMode: 'fulltext' };
      },
    });
    prompts.length = 0;
    await run();
    expect(asked).toEqual([[{ tenantId: 'ten', userId: 'u1' }, 'how do I indent Go?', TURN_MEMORIES]]);
    expect(finished).toEqual(['sent']);
    const parts = prompts[0].parts;
    expect(parts).toHaveLength(2);
    expect(parts[0]).toEqual({ id: 'prt_1', type: 'text', text: 'how do I indent Go?' });
    expect(parts[1]).toMatchObject({ type: 'text', synthetic: true, text: expect.stringContaining('- [preference, 2026-11-20] tabs, always') });
    expect(parts[1].id > parts[0].id).toBe(true);
  });

  it('sends the prompt alone when nothing is recalled, when the recall fails, and when it hangs', async () => {
    const cases: Array<Pick<AgentMemoriesService, 'recallForTurn'>> = [
      { recallForTurn: async () => ({ memories: [], searchMode: 'recent' }) },
      { recallForTurn: async () => Promise.reject(new Error('database is down')) },
      { recallForTurn: () => new Promise(() => {}) },
    ];
    for (const memories of cases) {
      const { run, finished } = runner(memories);
      prompts.length = 0;
      await run();
      expect(finished).toEqual(['sent']);
      expect(prompts[0].parts).toEqual([{ id: 'prt_1', type: 'text', text: 'how do I indent Go?' }]);
    }
  }, 10_000);

  it('does not wait past its bound for a slow snapshot of the workspace: the prompt goes, and the late snapshot is dropped', async () => {
    let finishSnapshot = () => {};
    const forgotten: string[] = [];
    const { run, finished } = runner(
      { recallForTurn: async () => ({ memories: [], searchMode: 'recent' }) },
      {
        snapshotWaitMs: 100,
        snapshots: {
          before: () => new Promise<void>((r) => (finishSnapshot = r)),
          forget: async (_owner, sessionId, messageId) => void forgotten.push(`${sessionId}/${messageId}`),
        },
      },
    );
    prompts.length = 0;
    const t0 = Date.now();
    await run();
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(finished).toEqual(['sent']);
    expect(prompts).toHaveLength(1);
    expect(forgotten).toEqual([]);
    finishSnapshot();
    await expect.poll(() => forgotten).toEqual(['s1/msg_1']);
  });
});
