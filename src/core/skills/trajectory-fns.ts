import type { RuntimeMessage } from '../runtime/runtime-client.js';
import { answerText } from '../sessions/session-turns.js';
import { abstractToolCall, lexicalSignature, toolGrams } from './skill-fns.js';

/**
 * What a finished turn looked like, read from the runtime's transcript (opencode 1.18.33 message and part
 * shapes, the only place outside src/core/runtime/ that reads them: the transcript is what the runtime
 * client returns): the user's request, the final answer, the abstract tool sequence, and whether it went
 * well. Pure: no I/O.
 */

/** A request or an answer as recorded (enough to recognise and summarise the work, not the whole text). */
const TRAJECTORY_TEXT_MAX = 2000;

/** opencode's messages when the person (or a rule) refused a tool call. */
const REJECTION = /The user rejected permission|has specified a rule which prevents you/;

export interface TurnReading {
  request: string;
  answer: string;
  /** The abstract tool calls, in the order the agent made them. */
  tools: string[];
  toolGrams: string[];
  words: string[];
  /** Why the turn failed (an error on one of its answers), or null. */
  error: string | null;
  /** A tool call of the turn was refused by the person or by a rule. */
  rejected: boolean;
  /** The turn's answer is complete (its last answer has ended). */
  finished: boolean;
}

const cut = (s: string) => (s.length > TRAJECTORY_TEXT_MAX ? `${s.slice(0, TRAJECTORY_TEXT_MAX)}…` : s);


/**
 * Reads the turn started by user message `messageId` (the last one when null) out of a session's
 * messages. Null when the transcript holds no such turn.
 */
export function readTurn(messages: RuntimeMessage[], messageId: string | null, workspace: string): TurnReading | null {
  const users = messages.filter((m) => m.info.role === 'user');
  const user = messageId ? users.find((m) => m.info.id === messageId) : users.at(-1);
  if (!user) return null;
  const answers = messages.filter((m) => m.info.role === 'assistant' && m.info.parentID === user.info.id);
  const tools: string[] = [];
  let rejected = false;
  for (const a of answers) {
    for (const p of a.parts) {
      if (p.type !== 'tool') continue;
      const state = (p.state ?? {}) as { status?: string; input?: Record<string, unknown>; error?: string };
      if (state.status === 'error' && REJECTION.test(String(state.error ?? ''))) rejected = true;
      tools.push(abstractToolCall(String(p.tool), state.input ?? {}, workspace));
    }
  }
  const failed = answers.find((a) => a.info.error);
  const err = failed?.info.error as { name?: string; data?: { message?: string } } | undefined;
  const last = answers.at(-1);
  const request = cut(answerText(user));
  return {
    request,
    answer: cut(last ? answerText(last) || answers.map(answerText).filter(Boolean).join('\n\n') : ''),
    tools,
    toolGrams: toolGrams(tools),
    words: lexicalSignature(request),
    error: err ? `${err.name ?? 'error'}: ${err.data?.message ?? 'the turn failed'}`.slice(0, 500) : null,
    rejected,
    finished: Boolean(last?.info.time.completed),
  };
}
