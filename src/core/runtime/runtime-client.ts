import { UpstreamError } from '../../kernel/errors.js';
import { MANAGED_CONFIG_ROUTE } from './host/managed-config.js';
import { openRuntimeSocket, requestRuntime, runtimeUnavailable, type RuntimeHandle, type RuntimeSocket } from './host/runtime-transport.js';

/**
 * The one place that speaks opencode's HTTP API (1.18.33), for one user's runtime. Everything else in
 * the core calls these methods with our own vocabulary; runtime specifics (paths, `?directory=`, Basic
 * auth, status codes) stay here.
 */
const TIMEOUT_MS = 10_000;

export interface RuntimeMessage {
  info: { id: string; sessionID: string; role: string; time: { created: number; completed?: number }; [k: string]: unknown };
  parts: Array<{ id: string; sessionID: string; messageID: string; type: string; [k: string]: unknown }>;
}

export interface PromptBody {
  messageID: string;
  parts: Array<Record<string, unknown>>;
  model?: { providerID: string; modelID: string };
  agent?: string;
  system?: string;
  tools?: Record<string, boolean>;
}

/** `onUnreachable`: the runtime did not answer (it may have stopped): the caller forgets what it cached. */
/** How long runCommand waits on a quiet connection before it connects again (the output is replayed whole). */
const COMMAND_QUIET_MS = 5000;

export function createRuntimeClient(handle: RuntimeHandle, onUnreachable: () => void = () => {}) {
  const { endpoint, directory } = handle;

  async function call(method: string, path: string, options: { body?: unknown; timeoutMs?: number; global?: boolean } = {}): Promise<{ status: number; json: unknown }> {
    const sep = path.includes('?') ? '&' : '?';
    const full = options.global ? path : `${path}${sep}directory=${encodeURIComponent(directory)}`;
    let r: { status: number; contentType: string; text: string };
    try {
      r = await requestRuntime(endpoint, method, full, { body: options.body, timeoutMs: options.timeoutMs ?? TIMEOUT_MS });
    } catch (err) {
      onUnreachable();
      throw runtimeUnavailable((err as Error).message);
    }
    if (r.status === 401) {
      onUnreachable();
      throw new UpstreamError('the agent runtime refused our credentials', { code: 'runtime_auth_failed' });
    }
    let json: unknown;
    if (r.text && r.contentType.includes('json')) json = JSON.parse(r.text);
    return { status: r.status, json };
  }

  const fail = (what: string, r: { status: number; json: unknown }) =>
    new UpstreamError(`the agent runtime failed to ${what} (HTTP ${r.status})`, { code: 'runtime_error', details: { status: r.status } });

  return {
    async health(): Promise<{ healthy: boolean; version: string }> {
      const r = await call('GET', '/global/health', { timeoutMs: 3000, global: true });
      if (r.status !== 200) throw fail('report health', r);
      return r.json as { healthy: boolean; version: string };
    },

    /**
     * A runner-hosted runtime's managed configuration, written by its runner (managed-config.ts); the
     * runtime takes it at its next reload. Returns whether it changed.
     */
    async writeManagedConfig(config: Record<string, unknown>): Promise<boolean> {
      const r = await call('PUT', MANAGED_CONFIG_ROUTE, { body: config, timeoutMs: 30_000, global: true });
      if (r.status !== 200) throw fail(`write the config (${JSON.stringify(r.json)?.slice(0, 300)})`, r);
      return Boolean((r.json as { changed?: boolean } | undefined)?.changed);
    },

    /**
     * Drops every workspace instance, so the next request builds it again from the configuration files
     * (a turn in progress is dropped with it).
     */
    async reload(): Promise<void> {
      const r = await call('POST', '/global/dispose', { timeoutMs: 30_000, global: true });
      if (r.status !== 200) throw fail('reload its configuration', r);
    },

    /** `parentID`: the runtime session this one is a child of (a plan's subtasks). */
    async createSession(body: { title: string; parentID?: string }): Promise<string> {
      const r = await call('POST', '/session', { body });
      if (r.status !== 200) throw fail('create a session', r);
      return (r.json as { id: string }).id;
    },

    async promptAsync(sessionId: string, body: PromptBody): Promise<void> {
      const r = await call('POST', `/session/${encodeURIComponent(sessionId)}/prompt_async`, { body, timeoutMs: 10_000 });
      if (r.status !== 204 && r.status !== 200) throw fail(`accept the prompt (${JSON.stringify(r.json)?.slice(0, 300)})`, r);
    },

    /** Whether the runtime knows the session (a runtime started afresh on another host may not). */
    async sessionExists(sessionId: string): Promise<boolean> {
      const r = await call('GET', `/session/${encodeURIComponent(sessionId)}`);
      if (r.status === 200) return true;
      if (r.status === 404) return false;
      throw fail('look up a session', r);
    },

    async messageExists(sessionId: string, messageId: string): Promise<boolean> {
      const r = await call('GET', `/session/${encodeURIComponent(sessionId)}/message/${encodeURIComponent(messageId)}`);
      if (r.status === 200) return true;
      if (r.status === 404) return false;
      throw fail('look up a message', r);
    },

    async messages(sessionId: string): Promise<RuntimeMessage[]> {
      const r = await call('GET', `/session/${encodeURIComponent(sessionId)}/message`);
      if (r.status === 404) return [];
      if (r.status !== 200) throw fail('list messages', r);
      return r.json as RuntimeMessage[];
    },

    /** The runtime's sessions with a turn in progress (busy or retrying); idle ones are not listed. */
    async busySessions(): Promise<string[]> {
      const r = await call('GET', '/session/status', { timeoutMs: 3000 });
      if (r.status !== 200) throw fail('report session status', r);
      return Object.entries((r.json ?? {}) as Record<string, { type?: string }>)
        .filter(([, st]) => st?.type === 'busy' || st?.type === 'retry')
        .map(([id]) => id);
    },

    /** The last `limit` messages of a session (oldest first), for finding the call in progress. */
    async recentMessages(sessionId: string, limit: number): Promise<RuntimeMessage[]> {
      const r = await call('GET', `/session/${encodeURIComponent(sessionId)}/message?limit=${limit}`, { timeoutMs: 3000 });
      if (r.status === 404) return [];
      if (r.status !== 200) throw fail('list messages', r);
      return r.json as RuntimeMessage[];
    },

    /** False when the runtime has no such pending request (unknown, or already answered). */
    async replyPermission(requestId: string, reply: 'once' | 'always' | 'reject', message?: string): Promise<boolean> {
      const r = await call('POST', `/permission/${encodeURIComponent(requestId)}/reply`, { body: { reply, ...(message ? { message } : {}) } });
      if (r.status === 404) return false;
      if (r.status !== 200) throw fail('take the permission reply', r);
      return true;
    },

    /**
     * Prepares the workspace's instance for its next turn after a configuration change made the runtime
     * drop it (or after a start). opencode 1.18.33 builds a workspace's services lazily, at its first
     * prompt: a file search builds its "location services" (~0.4 s on two cores), and listing the
     * configured providers loads them (~0.15 s). With both, the next turn starts as fast as any other
     * (~0.2 s from the prompt to its model request, against ~0.6 s without them). Before the runtime was
     * given an empty models.dev catalog (runtimeEnv) these took ~1.1 and ~0.9 s, and the first prompt
     * ~1.6 s. Best effort: what fails here is done by the next turn.
     */
    async warmUp(): Promise<void> {
      await Promise.all([
        call('GET', '/find/file?query=.&limit=1', { timeoutMs: 20_000 }).catch(() => {}),
        call('GET', '/config/providers', { timeoutMs: 20_000 }).catch(() => {}),
      ]);
    },

    /**
     * A new runtime session holding a copy of this one's messages before `beforeMessageId` (opencode 1.18.33
     * `POST /session/:id/fork`: it copies each message whose id sorts before it, under new ids; none
     * given: all of them), in the same directory. Returns the new session's id.
     */
    async fork(sessionId: string, beforeMessageId: string | null): Promise<string> {
      const r = await call('POST', `/session/${encodeURIComponent(sessionId)}/fork`, { body: beforeMessageId ? { messageID: beforeMessageId } : {}, timeoutMs: 30_000 });
      if (r.status !== 200) throw fail(`branch the session (${JSON.stringify(r.json)?.slice(0, 300)})`, r);
      return (r.json as { id: string }).id;
    },

    /** The session's undo state: the prompt it is reverted to (that turn and every later one undone), or null. */
    async revertState(sessionId: string): Promise<{ messageId: string } | null> {
      const r = await call('GET', `/session/${encodeURIComponent(sessionId)}`);
      if (r.status === 404) return null;
      if (r.status !== 200) throw fail('look up a session', r);
      const revert = (r.json as { revert?: { messageID?: string } } | undefined)?.revert;
      return revert?.messageID ? { messageId: revert.messageID } : null;
    },

    /**
     * Marks the session reverted to before `messageId` (a prompt): the transcript hides that turn and every
     * later one; their messages stay until the next prompt, which drops them, or an unrevert. With its own
     * snapshots off (the service keeps them: turn-snapshots.ts) the runtime touches no file. Refused while busy.
     */
    async revert(sessionId: string, messageId: string): Promise<void> {
      const r = await call('POST', `/session/${encodeURIComponent(sessionId)}/revert`, { body: { messageID: messageId }, timeoutMs: 60_000 });
      if (r.status !== 200) throw fail(`undo the turn (${JSON.stringify(r.json)?.slice(0, 300)})`, r);
    },

    /** The session no longer reverted: the hidden turns are shown again. */
    async unrevert(sessionId: string): Promise<void> {
      const r = await call('POST', `/session/${encodeURIComponent(sessionId)}/unrevert`, { timeoutMs: 60_000 });
      if (r.status !== 200) throw fail(`redo the turn (${JSON.stringify(r.json)?.slice(0, 300)})`, r);
    },

    /**
     * A terminal in the sandbox (opencode 1.18.33 `POST /pty`): with no command opencode starts the
     * shell of its own environment (SHELL, else bash) with `-l`, in the workspace, with the runtime
     * process's environment plus `TERM=xterm-256color`: exactly what the agent's bash tool runs with.
     * Nothing of the appliance is added here (no env, no command, no cwd from the caller).
     */
    async createPty(): Promise<RuntimePty> {
      const r = await call('POST', '/pty', { body: { title: 'workspace terminal' } });
      if (r.status !== 200) throw fail(`open a terminal (${JSON.stringify(r.json)?.slice(0, 300)})`, r);
      const p = r.json as { id: string; pid: number; command: string; cwd: string };
      return { id: p.id, pid: p.pid, command: p.command, cwd: p.cwd };
    },

    /**
     * A command of the service's, run in the sandbox next to the agent (git for a code-host run),
     * through the same pty as the terminal: same user, filesystem view, egress proxy and environment as
     * the agent's bash tool, on this machine or a runner host alike. What opencode 1.18.33 does with it
     * (read from the binary): `POST /pty {command, args, cwd, title, env}` spawns `command args` (plus `-l`
     * when it is a login shell: for `sh -c` that is only `$0`) with the runtime's environment and `env`;
     * output is buffered from the start and replayed to a socket that connects later, but a pty whose
     * process has exited refuses a connection. So `script` runs inside `/bin/sh -c`, and after it the
     * shell prints `<marker>:<exit status>` and waits on its terminal: the socket reads everything,
     * however fast the script was, and the pty is removed (its shell killed) once the marker is read or
     * the time is up. `marker` must be unguessable to the agent (the output is the sandbox's).
     */
    async runCommand(script: string, o: { marker: string; timeoutMs: number; env?: Record<string, string>; title?: string }): Promise<{ exitCode: number | null; output: string }> {
      const wrapped = `( ${script}\n) </dev/null; printf '\\n%s:%s\\n' ${o.marker} "$?"; read -r _`;
      const r = await call('POST', '/pty', { body: { command: '/bin/sh', args: ['-c', wrapped], title: o.title ?? 'agentws command', env: o.env ?? {} } });
      if (r.status !== 200) throw fail(`run a command (${JSON.stringify(r.json)?.slice(0, 300)})`, r);
      const id = (r.json as { id: string }).id;
      const done = new RegExp(`\\n${o.marker}:(\\d+)\\r?\\n`);
      const deadline = Date.now() + o.timeoutMs;
      let output = '';
      let exitCode: number | null = null;
      try {
        // Read until the marker. A connection that goes quiet without it is made again: opencode replays
        // the terminal's whole output to each new connection, and under load a run's first connection
        // once never carried the marker (the bench saw 1 command in 22 wait until the runtime stopped).
        for (let ended = false; exitCode === null && !ended && Date.now() < deadline; ) {
          const conn = await this.connectPty(id);
          output = '';
          try {
            ended = await new Promise<boolean>((resolve) => {
              const quiet = setTimeout(() => resolve(false), Math.min(COMMAND_QUIET_MS, Math.max(0, deadline - Date.now())));
              conn.onOutput((text) => {
                output += text;
                quiet.refresh();
                const m = done.exec(output.replace(/\r\n/g, '\n'));
                if (m) {
                  clearTimeout(quiet);
                  exitCode = Number(m[1]);
                  resolve(true);
                }
              });
              conn.onClosed(() => {
                clearTimeout(quiet);
                resolve(true);
              });
            });
          } finally {
            conn.close();
          }
        }
        return { exitCode, output: output.replace(/\r\n/g, '\n') };
      } finally {
        await this.removePty(id).catch(() => {});
      }
    },

    /** The terminal's size in characters (`PUT /pty/:id`); false when the runtime no longer has it. */
    async resizePty(id: string, cols: number, rows: number): Promise<boolean> {
      const r = await call('PUT', `/pty/${encodeURIComponent(id)}`, { body: { size: { cols, rows } }, timeoutMs: 5000 });
      if (r.status === 404) return false;
      if (r.status !== 200) throw fail('resize the terminal', r);
      return true;
    },

    /** Ends the terminal's shell (`DELETE /pty/:id`: opencode kills it); false when it had ended already. */
    async removePty(id: string): Promise<boolean> {
      const r = await call('DELETE', `/pty/${encodeURIComponent(id)}`, { timeoutMs: 5000 });
      if (r.status === 404) return false;
      if (r.status !== 200) throw fail('close the terminal', r);
      return true;
    },

    /**
     * The terminal's WebSocket (`GET /pty/:id/connect`): each text message is the shell's output, each
     * message sent is written to it as typed. opencode also sends binary messages (a NUL and JSON: the
     * cursor to resume a replay from), which a single live connection does not need: dropped here.
     */
    async connectPty(id: string): Promise<PtyConnection> {
      let socket: RuntimeSocket;
      try {
        socket = await openRuntimeSocket(endpoint, `/pty/${encodeURIComponent(id)}/connect?directory=${encodeURIComponent(directory)}`);
      } catch (err) {
        throw runtimeUnavailable((err as Error).message);
      }
      // Output and the close are kept until someone listens (the caller does once this returns): the
      // runtime replays a terminal's output at once, and a command may have ended before that.
      const output: Array<(text: string) => void> = [];
      const closed: Array<(why: string) => void> = [];
      const early: string[] = [];
      let ended: string | null = null;
      socket.onFrame((f) => {
        if (f.kind === 'text') {
          if (output.length) for (const l of output) l(f.data);
          else early.push(f.data);
        } else if (f.kind === 'close') {
          ended = f.reason || `the terminal's socket closed (${f.code})`;
          for (const l of closed) l(ended);
        }
      });
      return {
        write: (text) => socket.send(text),
        onOutput: (l) => {
          output.push(l);
          if (output.length === 1) for (const text of early.splice(0)) l(text);
        },
        onClosed: (l) => {
          closed.push(l);
          if (ended !== null) l(ended);
        },
        close: () => socket.close(),
      };
    },

    async abort(sessionId: string): Promise<void> {
      const r = await call('POST', `/session/${encodeURIComponent(sessionId)}/abort`);
      if (r.status !== 200 && r.status !== 404) throw fail('abort the session', r);
    },

    /**
     * Removes a session from the runtime's own store (opencode deletes its messages, parts and child
     * sessions with it). False when the runtime did not know it (removed before, or never stored).
     */
    async deleteSession(sessionId: string): Promise<boolean> {
      const r = await call('DELETE', `/session/${encodeURIComponent(sessionId)}`, { timeoutMs: 30_000 });
      if (r.status === 404) return false;
      if (r.status !== 200 && r.status !== 204) throw fail('delete the session', r);
      return true;
    },
  };
}

export type RuntimeClient = ReturnType<typeof createRuntimeClient>;

/** A terminal's shell in the runtime, as the service uses it (output text; opencode's replay cursors dropped). */
export interface RuntimePty {
  id: string;
  /** Its process id inside the sandbox. */
  pid: number;
  /** The shell opencode started: the sandbox's preferred one (bash here), as a login shell. */
  command: string;
  cwd: string;
}
export interface PtyConnection {
  write(text: string): void;
  /** Output as the shell writes it; `closed` once the socket ends (the shell exited, the runtime stopped). */
  onOutput(listener: (text: string) => void): void;
  onClosed(listener: (why: string) => void): void;
  close(): void;
}
