import { randomUUID } from 'node:crypto';
import type { Database } from '../../db/database.js';
import { hasPermission, requirePermission, requireTokenScope, requireUser } from '../../kernel/authz.js';
import type { Ctx, UserActor } from '../../kernel/context.js';
import { ForbiddenError, ValidationError } from '../../kernel/errors.js';
import type { EventBus } from '../../kernel/events.js';
import type { Logger } from '../../kernel/logger.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import type { AuditService } from '../audit/audit.service.js';
import { AUTH_REVOKED } from '../auth/authentication.js';
import { RBAC_CHANGED } from '../rbac/rbac.service.js';
import { createRuntimeClient, type PtyConnection, type RuntimeClient } from '../runtime/runtime-client.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';

/**
 * Workspace terminals: a shell in the person's own sandbox, which is the agent's: the same
 * filesystem view, user, processes limits and egress proxy, and the runtime's environment (opencode's
 * pty, runtime-client.ts createPty). The service passes keystrokes in and output out, and ends the
 * terminal when it may no longer be open: its credential no longer holds (sign-out, deactivation,
 * removal: checked at once on AUTH_REVOKED, and every RECHECK_MS), its person no longer holds
 * agents.terminal (RBAC_CHANGED, and every RECHECK_MS), no keystroke for the idle time, or the runtime
 * stopped. Opened and closed are audited (how long, and why it closed).
 */
const TERMINAL_RECHECK_MS = 5000;
/** The most terminals one person has open at once (each is a shell in their sandbox). */
const TERMINALS_PER_USER = 4;
/** The longest single message of keystrokes (a paste) passed to the shell. */
export const TERMINAL_INPUT_MAX_CHARS = 64 * 1024;

/** Why a terminal closed: audited, and the WebSocket's close reason (with its code, see closeCode). */
type TerminalCloseReason = 'client' | 'idle' | 'signed_out' | 'permission_removed' | 'runtime_stopped' | 'shell_exited' | 'service_stopping';

/** The WebSocket close code of each reason: 1000/1001 as the protocol defines; 44xx: the service's. */
const TERMINAL_CLOSE_CODES: Record<TerminalCloseReason, number> = {
  client: 1000,
  shell_exited: 1000,
  service_stopping: 1001,
  signed_out: 4401,
  permission_removed: 4403,
  idle: 4408,
  runtime_stopped: 4410,
};
const CLOSE_TEXT: Record<TerminalCloseReason, string> = {
  client: 'closed',
  shell_exited: 'the shell ended',
  service_stopping: 'the service is restarting',
  signed_out: 'your sign-in ended',
  permission_removed: 'you no longer hold agents.terminal',
  idle: 'closed after no keystroke for the idle time',
  runtime_stopped: 'your runtime stopped',
};

/** Where a terminal's output goes (the WebSocket): attached once it is open. */
interface TerminalSink {
  output(text: string): void;
  closed(code: number, reason: TerminalCloseReason, text: string): void;
}

export interface Terminal {
  id: string;
  cwd: string;
  attach(sink: TerminalSink): void;
  input(text: string): void;
  resize(cols: number, rows: number): Promise<void>;
  close(why: TerminalCloseReason): Promise<void>;
}

interface Open {
  terminal: Terminal;
  ctx: Ctx;
  tenantId: string;
  userId: string;
  lastInput: number;
  checking: boolean;
  recheck: () => Promise<RbacPermissions>;
}

export function createTerminalService(deps: { db: Database; audit: AuditService; pool: RuntimePool; bus: EventBus; idleMs: number; recheckMs?: number; log: Logger }) {
  const { db, audit, pool, bus, log } = deps;
  const open = new Map<string, Open>();
  let timer: NodeJS.Timeout | null = null;
  let subscribed: Promise<Array<() => Promise<void>>> | null = null;
  let offRuntime: (() => void) | null = null;

  /** Every RECHECK_MS while a terminal is open: its credential and permission, its idle time; keeps its runtime awake. */
  function startWatching() {
    if (timer) return;
    timer = setInterval(() => {
      const now = Date.now();
      for (const o of open.values()) {
        if (now - o.lastInput >= deps.idleMs) void o.terminal.close('idle');
        else {
          pool.keepAwake(o.userId);
          void recheck(o);
        }
      }
    }, Math.min(deps.recheckMs ?? TERMINAL_RECHECK_MS, Math.max(250, Math.floor(deps.idleMs / 4))));
    timer.unref();
    // A sign-out or deactivation (AUTH_REVOKED), a role changed (RBAC_CHANGED): checked at once, a moment
    // after the change commits (the role cache drops its documents on the same event).
    subscribed ??= Promise.all([
      bus.subscribe(AUTH_REVOKED, () => setTimeout(() => open.forEach((o) => void recheck(o)), 50).unref()),
      bus.subscribe(RBAC_CHANGED, (p) => {
        const tenantId = (p as { tenantId?: string } | null)?.tenantId;
        setTimeout(() => open.forEach((o) => (!tenantId || o.tenantId === tenantId) && void recheck(o)), 50).unref();
      }),
    ]).catch((err) => {
      log.warn({ err: (err as Error).message }, 'terminals cannot hear sign-outs and role changes: they are re-checked on their interval only');
      subscribed = null;
      return [];
    });
    offRuntime ??= pool.onChange((owner, handle) => {
      if (handle) return;
      for (const o of open.values()) if (o.userId === owner.userId && o.tenantId === owner.tenantId) void o.terminal.close('runtime_stopped');
    });
  }

  async function recheck(o: Open): Promise<void> {
    if (o.checking) return;
    o.checking = true;
    try {
      const permissions = await o.recheck();
      if (!hasPermission(permissions, 'agents.terminal')) await o.terminal.close('permission_removed');
    } catch (err) {
      const status = (err as { status?: number }).status;
      // A credential that no longer holds (401, 403, 404 of a removed user); anything else (the database
      // unreachable a moment) is tried again at the next check.
      if (status === 401 || status === 403 || status === 404) await o.terminal.close('signed_out');
      else o.ctx.log.warn({ err: (err as Error).message }, 'a terminal\'s re-check failed: tried again shortly');
    } finally {
      o.checking = false;
    }
  }

  return {
    /**
     * Opens a terminal in the caller's own runtime (started if need be): needs agents.terminal (a
     * personal access token also needs the sessions scope). `recheck` is the caller's credential checked
     * again (authentication recheckOf): it must hold now too. Output is kept until a sink is attached.
     */
    async open(ctx: Ctx, input: { recheckOf: (actor: UserActor) => Promise<() => Promise<RbacPermissions>>; cols?: number; rows?: number }): Promise<Terminal> {
      const actor = requireUser(ctx, 'terminals');
      const tenantId = requirePermission(ctx, 'agents.terminal');
      requireTokenScope(ctx, 'sessions');
      const recheck = await input.recheckOf(actor);
      if (!hasPermission(await recheck(), 'agents.terminal')) throw new ForbiddenError('missing permission agents.terminal', { details: { permission: 'agents.terminal' } });
      const mine = [...open.values()].filter((o) => o.userId === actor.userId).length;
      if (mine >= TERMINALS_PER_USER) {
        throw new ValidationError(`you have ${mine} terminals open: at most ${TERMINALS_PER_USER} at once`, { code: 'too_many_terminals', hint: 'Close one (its tab) first.' });
      }
      startWatching();
      const owner = { tenantId, userId: actor.userId };
      const client: RuntimeClient = createRuntimeClient(await pool.acquire(owner));
      const pty = await client.createPty();
      let conn: PtyConnection;
      try {
        conn = await client.connectPty(pty.id);
      } catch (err) {
        await client.removePty(pty.id).catch(() => {});
        throw err;
      }
      const openedAt = Date.now();
      const id = randomUUID();
      let sink: TerminalSink | null = null;
      let pending: string[] = [];
      let closing: Promise<void> | null = null;
      // Keystrokes that arrive before the shell first wrote (its prompt) wait for it: bash discards
      // what was typed ahead while it sets its terminal up (measured: a command sent at once was lost).
      let early: string[] | null = [];
      const shellReady = () => {
        const typed = early;
        early = null;
        for (const text of typed ?? []) conn.write(text);
      };
      setTimeout(shellReady, 5000).unref();
      conn.onOutput((text) => {
        if (early) setTimeout(shellReady, 50);
        if (sink) sink.output(text);
        else pending.push(text);
      });
      // The socket ended without us: the shell exited, or the runtime went with it.
      conn.onClosed(() => void pool.runningHandle(owner).then((h) => terminal.close(h ? 'shell_exited' : 'runtime_stopped'), () => terminal.close('runtime_stopped')));
      const terminal: Terminal = {
        id,
        cwd: pty.cwd,
        attach(s) {
          sink = s;
          for (const text of pending) s.output(text);
          pending = [];
        },
        input(text) {
          if (closing) return;
          const o = open.get(id);
          if (o) o.lastInput = Date.now();
          pool.keepAwake(owner.userId);
          const bounded = text.length > TERMINAL_INPUT_MAX_CHARS ? text.slice(0, TERMINAL_INPUT_MAX_CHARS) : text;
          if (early) early.push(bounded);
          else conn.write(bounded);
        },
        async resize(cols, rows) {
          if (closing) return;
          await client.resizePty(pty.id, cols, rows).catch((err) => ctx.log.debug({ err: (err as Error).message }, 'terminal resize failed'));
        },
        close(why) {
          closing ??= (async () => {
            open.delete(id);
            conn.close();
            await client.removePty(pty.id).catch(() => {});
            const seconds = Math.round((Date.now() - openedAt) / 100) / 10;
            await db
              .transaction((tx) => audit.record(tx, { ...ctx, tenantId }, { action: 'terminal.close', target: `terminal:${id}`, details: { seconds, reason: why } }))
              .catch((err) => ctx.log.error({ err: (err as Error).message }, 'could not audit a terminal\'s close'));
            sink?.closed(TERMINAL_CLOSE_CODES[why], why, CLOSE_TEXT[why]);
          })();
          return closing;
        },
      };
      try {
        await db.transaction((tx) => audit.record(tx, { ...ctx, tenantId }, { action: 'terminal.open', target: `terminal:${id}`, details: { shell: pty.command, cwd: pty.cwd } }));
      } catch (err) {
        conn.close();
        await client.removePty(pty.id).catch(() => {});
        throw err;
      }
      open.set(id, { terminal, ctx, tenantId, userId: actor.userId, lastInput: Date.now(), checking: false, recheck });
      if (input.cols && input.rows) await terminal.resize(input.cols, input.rows);
      return terminal;
    },

    /** How many terminals are open in this process (status, tests). */
    count: () => open.size,

    /** Closes every terminal (shutdown). */
    async stop(): Promise<void> {
      if (timer) clearInterval(timer);
      timer = null;
      await Promise.all([...open.values()].map((o) => o.terminal.close('service_stopping')));
      offRuntime?.();
      offRuntime = null;
      const offs = await subscribed;
      subscribed = null;
      for (const off of offs ?? []) await off().catch(() => {});
    },
  };
}
