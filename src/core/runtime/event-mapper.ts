import { modelRefOf } from './runtime-ids.js';
import type { RuntimeEvent } from './runtime-events.js';

/**
 * The one place that knows the shapes of the runtime's (opencode 1.18.33) events. It turns one
 * `RuntimeEvent` into a domain event the session stream can act on without reading any opencode field:
 * what to forward to the session's subscribers (the SPEC.md "Events" shape, still carrying the runtime's
 * session ids) and, for the events we react to, the facts they carry. Pure: no I/O, no clock, no ids.
 */

/** The runtime's event types SPEC.md lets through to clients; every other type is dropped. */
export const FORWARDED_TYPES = [
  'message.updated',
  'message.removed',
  'message.part.updated',
  'message.part.removed',
  'message.part.delta',
  'permission.asked',
  'permission.replied',
  'session.status',
  'session.idle',
  'session.error',
  'session.compacted',
] as const;
type ForwardedType = (typeof FORWARDED_TYPES)[number];
const FORWARDED: ReadonlySet<string> = new Set(FORWARDED_TYPES);

/** Token counts of an assistant message, passed on unchanged (the analytics job reads them). */
interface MessageTokens {
  input?: number;
  output?: number;
  reasoning?: number;
  cache?: { read?: number; write?: number };
  [k: string]: unknown;
}

/** What every mapped event has: the event as it is forwarded to the session's subscribers. */
interface Forwarded {
  /** The runtime's id of the session the event belongs to (the stream maps it to ours). */
  upstreamSessionId: string;
  /** The runtime's own event id (ascending, the same in every process), when it sent one. */
  eventId?: string;
  type: ForwardedType;
  /**
   * The properties to forward, already in the SPEC.md shape (status mapped, server paths stripped) but
   * with the runtime's session ids: `clientProperties` puts ours in.
   */
  properties: Record<string, unknown>;
}

/** A runtime event as the session stream sees it: forwarded, and possibly a fact to react to. */
export type SessionDomainEvent = Forwarded &
  (
    | { kind: 'forward' }
    /** The runtime asks the owner before a tool runs. */
    | { kind: 'permissionAsked'; requestId: string; permission: string; patterns: string[] }
    /** A permission request was answered (through us, or by the runtime itself after an `always`). */
    | { kind: 'permissionReplied'; requestId: string }
    /** An assistant message was created or updated (each model step of a turn is one message). */
    | {
        kind: 'assistantMessage';
        messageId: string;
        /** The user message that started the turn, when known. */
        parentId: string | null;
        providerId: string;
        modelId: string;
        tokens: MessageTokens | null;
        /** Cost so far in USD; null when the runtime did not report a number. */
        cost: number | null;
        completed: boolean;
      }
    /** A tool call reached its end (completed or failed). */
    | {
        kind: 'toolFinished';
        partId: string;
        tool: string;
        callId: string;
        status: 'completed' | 'error';
        durationMs: number | null;
        title?: string;
        /** The skill the runtime's `skill` tool loaded (its name as the model asked). */
        skill?: string;
      }
    /**
     * The model called a tool it was not given (the runtime answers with its `invalid` stand-in tool);
     * `requestedTool` is the name the model asked for, when the runtime says.
     */
    | { kind: 'invalidToolCall'; partId: string; requestedTool: string | null }
    /** A text part of a message as it stands (its text so far: the whole of it, not a delta). */
    | { kind: 'textPart'; messageId: string; partId: string; text: string }
    /** More text of a part, as the model writes it (of a text part, or of another kind: reasoning). */
    | { kind: 'textDelta'; messageId: string; partId: string; delta: string }
    /** The session's turn ended. */
    | { kind: 'turnIdle' }
  );

/** Maps one runtime event to a domain event, or null for events clients do not see (other types, no session). */
export function mapRuntimeEvent(ev: RuntimeEvent): SessionDomainEvent | null {
  const { type, properties: props } = ev.payload;
  if (!FORWARDED.has(type)) return null;
  // Most events name their session at the top; message and part updates of older runtimes only inside.
  const upstreamSessionId: string | undefined = props?.sessionID ?? props?.info?.sessionID ?? props?.part?.sessionID;
  if (!upstreamSessionId) return null;
  const base: Forwarded = { upstreamSessionId, type: type as ForwardedType, properties: { ...props }, ...(ev.payload.id != null ? { eventId: ev.payload.id } : {}) };

  switch (type) {
    case 'session.status': {
      // Clients see two states: busy and retry are both `running` (a retry says why it waits).
      const st = props.status ?? {};
      base.properties.status = st.type === 'idle' ? { type: 'idle' } : { type: 'running', ...(st.type === 'retry' ? { retry: { attempt: st.attempt, message: st.message, next: st.next } } : {}) };
      return { ...base, kind: 'forward' };
    }
    case 'message.updated': {
      // `path` holds the server's directories: never shown to clients.
      const { path: _path, ...info } = props.info ?? {};
      base.properties.info = info;
      if (info.role !== 'assistant') return { ...base, kind: 'forward' };
      return {
        ...base,
        kind: 'assistantMessage',
        messageId: info.id,
        parentId: info.parentID ? info.parentID : null,
        providerId: info.providerID ?? '',
        modelId: info.modelID ?? '',
        tokens: info.tokens ? info.tokens : null,
        cost: typeof info.cost === 'number' ? info.cost : null,
        completed: Boolean(info.time?.completed),
      };
    }
    case 'message.part.updated': {
      const part = props.part ?? {};
      base.properties.part = { ...part };
      const st = part.state ?? {};
      if (part.type === 'text' && typeof part.id === 'string' && typeof part.messageID === 'string') {
        return { ...base, kind: 'textPart', messageId: part.messageID, partId: part.id, text: typeof part.text === 'string' ? part.text : '' };
      }
      if (part.type !== 'tool' || (st.status !== 'completed' && st.status !== 'error')) return { ...base, kind: 'forward' };
      if (part.tool === 'invalid') {
        const requested = st.input?.tool;
        return { ...base, kind: 'invalidToolCall', partId: part.id, requestedTool: typeof requested === 'string' ? requested : null };
      }
      return {
        ...base,
        kind: 'toolFinished',
        partId: part.id,
        tool: part.tool,
        callId: part.callID,
        status: st.status,
        durationMs: st.time?.end && st.time?.start ? Math.max(0, Math.round(st.time.end - st.time.start)) : null,
        ...(typeof st.title === 'string' ? { title: st.title } : {}),
        ...(part.tool === 'skill' && typeof st.input?.name === 'string' ? { skill: st.input.name.slice(0, 100) } : {}),
      };
    }
    case 'permission.asked':
      return { ...base, kind: 'permissionAsked', requestId: props.id, permission: String(props.permission), patterns: props.patterns ?? [] };
    case 'permission.replied':
      return typeof props.requestID === 'string' ? { ...base, kind: 'permissionReplied', requestId: props.requestID } : { ...base, kind: 'forward' };
    case 'session.idle':
      return { ...base, kind: 'turnIdle' };
    case 'message.part.delta':
      return props.field === 'text' && typeof props.messageID === 'string' && typeof props.partID === 'string' && typeof props.delta === 'string'
        ? { ...base, kind: 'textDelta', messageId: props.messageID, partId: props.partID, delta: props.delta }
        : { ...base, kind: 'forward' };
    default:
      return { ...base, kind: 'forward' };
  }
}

/**
 * The forwarded properties with our session id wherever the runtime puts its own: at the top, and in
 * the message of a message update and the part of a part update. With the tenant, an answer's update also
 * names its model ("<provider>/<model id>").
 */
export function clientProperties(ev: Pick<SessionDomainEvent, 'type' | 'properties'>, sessionId: string, tenantId?: string): Record<string, unknown> {
  const out: Record<string, unknown> = { ...ev.properties, sessionID: sessionId };
  if (ev.type === 'message.updated') {
    const info = ev.properties.info as Record<string, unknown>;
    // The model an answer runs on, as the tenant names it, as the transcript says it.
    const model = tenantId && info ? modelRefOf(tenantId, info) : null;
    out.info = { ...info, ...(model ? { model } : {}), sessionID: sessionId };
  }
  if (ev.type === 'message.part.updated') out.part = { ...(ev.properties.part as object), sessionID: sessionId };
  return out;
}
