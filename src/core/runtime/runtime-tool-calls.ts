import type { RuntimeClient, RuntimeMessage } from './runtime-client.js';
import type { ToolCallOrigin } from './host/runtime-host.js';

export type { ToolCallOrigin };

/*
 * Which session and message of a user's runtime a tool call that reached the service belongs to
 * (ToolCallOrigin). opencode (1.18) calls a remote MCP server with the same static headers for every
 * session, so the call itself does not say; the runtime does: while the tool runs, its part sits in the
 * assistant message in state `pending`/`running` with the arguments the model gave. We look for that part
 * among the sessions the runtime reports busy. The answer is the runtime's own ids (`ses_…`, `msg_…`):
 * callers map the session to ours and check that it belongs to the runtime's user.
 */

const sameInput = (a: unknown, want: Record<string, unknown>): boolean => {
  if (!a || typeof a !== 'object') return false;
  const got = a as Record<string, unknown>;
  return Object.keys(want).every((k) => got[k] === want[k]);
};

function findPart(messages: RuntimeMessage[], tool: string, input: Record<string, unknown>): string | null {
  for (const m of [...messages].reverse()) {
    if (m.info.role !== 'assistant') continue;
    for (const p of m.parts) {
      const state = p.state as { status?: string; input?: unknown } | undefined;
      if (p.type === 'tool' && p.tool === tool && (state?.status === 'running' || state?.status === 'pending') && sameInput(state.input, input)) return m.info.id;
    }
  }
  return null;
}

/**
 * Finds the call of `tool` with `input` in progress in the runtime. The runtime may write the part's
 * running state a moment after it sent the call, so it looks a few times. When no part matches but
 * exactly one session is busy, that session's latest assistant message is the answer (a tool reaching
 * the server another way, e.g. from the agent's shell, still runs inside that turn); with none or
 * several busy sessions and no match it cannot tell, and answers null.
 */
export async function locateToolCall(
  client: Pick<RuntimeClient, 'busySessions' | 'recentMessages'>,
  call: { tool: string; input: Record<string, unknown> },
  options: { attempts?: number; delayMs?: number } = {},
): Promise<ToolCallOrigin | null> {
  const attempts = options.attempts ?? 8;
  const delayMs = options.delayMs ?? 100;
  let busy: string[] = [];
  let latest: RuntimeMessage[] = [];
  for (let i = 0; i < attempts; i++) {
    if (i) await new Promise((r) => setTimeout(r, delayMs));
    busy = await client.busySessions();
    for (const sessionId of busy) {
      const messages = await client.recentMessages(sessionId, 4);
      if (busy.length === 1) latest = messages;
      const messageId = findPart(messages, call.tool, call.input);
      if (messageId) return { upstreamSessionId: sessionId, messageId, match: 'exact' };
    }
  }
  if (busy.length !== 1) return null;
  const last = [...latest].reverse().find((m) => m.info.role === 'assistant') ?? latest.at(-1);
  return last ? { upstreamSessionId: busy[0], messageId: last.info.id, match: 'session' } : null;
}
