import { UnavailableError, ValidationError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/logger.js';
import { workspaceDir } from '../../lib/data-paths.js';
import { runtimeRoot } from '../runtime/host/managed-config.js';
import type { RuntimeOwner } from '../runtime/host/runtime-host.js';
import { dialRunner } from '../runtime/host/runtime-transport.js';
import { answerSnapshots, snapshotStore, WORKSPACE_SNAPSHOTS_ROUTE, type FileChange, type RestoreResult, type SnapshotOp, type SnapshotResult } from '../runtime/host/workspace-snapshots.js';

/**
 * The service's snapshots of a person's workspace around each turn: one just before the turn
 * is handed to the runtime (`before`), one when it ends (`after`: also when it is stopped, lost or fails),
 * kept as refs of the person's snapshot store: `s/<session>/<prompt message id>/before|after`, and
 * `s/<session>/redo` (the workspace as it was just before an undo). Taken on the host that holds the
 * files (host/workspace-snapshots.ts): this serve for a local runtime, the runner host for one placed
 * there (through the runner channel). A snapshot that fails never fails the turn: it is logged, and the
 * turn's changes say they were not recorded.
 */
export interface TurnRefs {
  before?: string;
  after?: string;
}

const beforeRef = (sessionId: string, messageId: string) => `s/${sessionId}/${messageId}/before`;
const afterRef = (sessionId: string, messageId: string) => `s/${sessionId}/${messageId}/after`;
const redoRef = (sessionId: string) => `s/${sessionId}/redo`;

export function createTurnSnapshots(deps: {
  dataDir: string;
  /** The runner the person is placed on; null: this serve (runner-fleet.ts placement). */
  placement: (owner: RuntimeOwner) => Promise<string | null>;
  /** AGENTWS_RUNTIME_SNAPSHOTS: off, none are taken. */
  enabled: boolean;
  log: Logger;
}) {
  /** After-snapshots still being taken, by session: the changes route waits for them. */
  const pending = new Map<string, Promise<unknown>>();

  async function call<T>(owner: RuntimeOwner, op: SnapshotOp, body: Record<string, unknown>): Promise<T> {
    const runnerId = await deps.placement(owner);
    let status: number;
    let json: unknown;
    if (!runnerId) {
      ({ status, json } = await answerSnapshots(workspaceDir(deps.dataDir, owner), snapshotStore(runtimeRoot(deps.dataDir, owner.userId)), op, body));
    } else {
      let res;
      try {
        res = await dialRunner({ runnerId, userId: owner.userId }, {
          method: 'POST',
          path: `${WORKSPACE_SNAPSHOTS_ROUTE}/${op}?${new URLSearchParams({ tenantId: owner.tenantId })}`,
          headers: { 'content-type': 'application/json' },
          body: Buffer.from(JSON.stringify(body)),
          timeoutMs: 120_000,
        });
      } catch (err) {
        throw new UnavailableError(`the runner host holding your workspace cannot be reached: ${(err as Error).message}`, { code: 'runner_unavailable' });
      }
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      status = res.statusCode;
      json = JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null');
    }
    if (status >= 300) {
      const e = json as { error?: string; message?: string } | null;
      if (status === 400) throw new ValidationError(e?.message ?? 'bad snapshot request', { code: e?.error });
      throw new UnavailableError(`the workspace's snapshots could not be read: ${e?.message ?? status}`, { code: e?.error ?? 'snapshot_failed' });
    }
    return json as T;
  }

  /** The turns of a session with their snapshots, by prompt message id (and the redo point). */
  async function refsOf(owner: RuntimeOwner, sessionId: string): Promise<{ turns: Map<string, TurnRefs>; redo: string | null }> {
    const refs = await call<Record<string, string>>(owner, 'refs', { prefix: `s/${sessionId}` });
    const turns = new Map<string, TurnRefs>();
    let redo: string | null = null;
    for (const [name, id] of Object.entries(refs)) {
      if (name === 'redo') redo = id;
      const [messageId, side] = name.split('/');
      if (side !== 'before' && side !== 'after') continue;
      const t = turns.get(messageId) ?? {};
      t[side] = id;
      turns.set(messageId, t);
    }
    return { turns, redo };
  }

  /** Takes one snapshot as the `after` of every turn of the session that has a before and no after yet. */
  async function closeOpen(owner: RuntimeOwner, sessionId: string, also: string[] = [], drop: string[] = [], known?: Map<string, TurnRefs>): Promise<SnapshotResult | null> {
    const turns = known ?? (await refsOf(owner, sessionId)).turns;
    const open = [...turns].filter(([, t]) => t.before && !t.after).map(([m]) => afterRef(sessionId, m));
    if (!open.length && !also.length) return null;
    return call<SnapshotResult>(owner, 'snapshot', { refs: [...open, ...also], drop });
  }

  const service = {
    /** AGENTWS_RUNTIME_SNAPSHOTS (the benchmark turns it off and on between turns of one serve). */
    enabled: deps.enabled,
    /**
     * Before a turn is handed to the runtime: the workspace as it is now (also the after of an earlier
     * turn whose end was not seen). A turn sent while an earlier one of the session still runs (the runtime
     * queues it behind) shares that turn's before: the two are recorded together, as one change. A prompt
     * drops undone turns for good, so the redo point goes. Never throws.
     */
    async before(owner: RuntimeOwner, sessionId: string, messageId: string, o: { busy?: boolean } = {}): Promise<void> {
      if (!service.enabled) return;
      try {
        await pending.get(sessionId);
        const { turns, redo } = await refsOf(owner, sessionId);
        const running = o.busy ? [...turns.values()].find((t) => t.before && !t.after) : undefined;
        if (running?.before) {
          await call(owner, 'set', { ref: beforeRef(sessionId, messageId), id: running.before });
          if (redo) await call(owner, 'delete', { refs: [redoRef(sessionId)] });
        } else {
          const r = await closeOpen(owner, sessionId, [beforeRef(sessionId, messageId)], redo ? [redoRef(sessionId)] : [], turns);
          deps.log.debug({ sessionId, messageId, ms: r?.ms, read: r?.read, files: r?.files }, 'workspace snapshot before the turn');
        }
      } catch (err) {
        deps.log.warn({ err: (err as Error).message, sessionId, messageId }, 'the workspace snapshot before a turn failed: its changes will not be recorded');
      }
    },
    /**
     * A before-snapshot that came too late (the turn was handed over without it: the agent may have written
     * meanwhile) is dropped when it ends, so the turn says `recorded: false` rather than show a wrong change
     * or undo to a state it was never in. Never throws.
     */
    async forget(owner: RuntimeOwner, sessionId: string, messageId: string): Promise<void> {
      try {
        await call(owner, 'delete', { refs: [beforeRef(sessionId, messageId)] });
      } catch (err) {
        deps.log.warn({ err: (err as Error).message, sessionId, messageId }, 'a late snapshot before a turn could not be dropped');
      }
    },
    /** A turn of the session ended (idle, stopped, lost, failed): its after-snapshot, in the background. Never throws. */
    after(owner: RuntimeOwner | (() => Promise<RuntimeOwner | null>), sessionId: string): Promise<void> {
      if (!service.enabled) return Promise.resolve();
      // Registered at once (before any await): a changes request right after the turn's end waits for it.
      const previous = pending.get(sessionId);
      const p = (async () => {
        await previous;
        const who = typeof owner === 'function' ? await owner() : owner;
        if (!who) return;
        const r = await closeOpen(who, sessionId);
        if (r) deps.log.debug({ sessionId, ms: r.ms, read: r.read, files: r.files }, 'workspace snapshot after the turn');
      })().catch((err) => deps.log.warn({ err: (err as Error).message, sessionId }, 'the workspace snapshot after a turn failed: its changes will not be recorded'));
      pending.set(sessionId, p);
      void p.finally(() => {
        if (pending.get(sessionId) === p) pending.delete(sessionId);
      });
      return p;
    },
    /** Waits for an after-snapshot of the session still being taken. */
    async settled(sessionId: string): Promise<void> {
      await pending.get(sessionId);
    },
    refsOf,
    /**
     * A branch of a session (session-fork.ts) gets the snapshots of the turns it copied, under its own
     * message ids (`pairs`: [the original's prompt, the branch's]): what those turns changed shows in the
     * branch, and an undo there puts the files back as before one of them. Only refs are written; the
     * snapshots themselves are shared. Returns how many turns had snapshots. Never throws.
     */
    async copyTurns(owner: RuntimeOwner, from: string, to: string, pairs: Array<[string, string]>): Promise<number> {
      if (!service.enabled || !pairs.length) return 0;
      try {
        await pending.get(from);
        const { turns } = await refsOf(owner, from);
        let copied = 0;
        for (const [was, now] of pairs) {
          const t = turns.get(was);
          if (!t?.before) continue;
          await call(owner, 'set', { ref: beforeRef(to, now), id: t.before });
          if (t.after) await call(owner, 'set', { ref: afterRef(to, now), id: t.after });
          copied++;
        }
        return copied;
      } catch (err) {
        deps.log.warn({ err: (err as Error).message, from, to }, 'the snapshots of a branch\'s turns could not be copied: its changes will not be recorded');
        return 0;
      }
    },
    changes: (owner: RuntimeOwner, a: string, b: string, patch: boolean) => call<{ files: FileChange[]; notKept: string[] }>(owner, 'changes', { a, b, patch }),
    /** Puts the workspace back as tree `target`, the state just before saved as the session's redo point. */
    restore: (owner: RuntimeOwner, sessionId: string, target: string) => call<RestoreResult>(owner, 'restore', { target, saveAs: redoRef(sessionId) }),
    dropRedo: (owner: RuntimeOwner, sessionId: string) => call(owner, 'delete', { refs: [redoRef(sessionId)] }),
  };
  return service;
}

export type TurnSnapshots = ReturnType<typeof createTurnSnapshots>;
