// The transcript of a session as the dashboard holds it, and how the session stream's events change it.
// Pure, so the unit tests check it without a browser (test/unit/web-transcript.test.ts).
import type { MessageInfo, Part, StreamEvent } from './types.js';

export interface Msg {
  info: MessageInfo;
  parts: Part[];
}

/** Applies one event of the session stream to the transcript (pure: returns a new list when it changed). */
export function applyEvent(messages: Msg[], e: StreamEvent): Msg[] {
  const p = e.properties ?? {};
  const upsertMessage = (info: MessageInfo) => {
    const i = messages.findIndex((m) => m.info.id === info.id);
    if (i < 0) return [...messages, { info, parts: [] }];
    const next = messages.slice();
    next[i] = { ...next[i], info: { ...next[i].info, ...info } };
    return next;
  };
  const withPart = (messageId: string, change: (parts: Part[]) => Part[]) => {
    let i = messages.findIndex((m) => m.info.id === messageId);
    let list = messages;
    if (i < 0) {
      // A part can arrive before its message's own event: hold it under a placeholder assistant message.
      list = [...messages, { info: { id: messageId, role: 'assistant' }, parts: [] }];
      i = list.length - 1;
    }
    const next = list.slice();
    next[i] = { ...next[i], parts: change(next[i].parts) };
    return next;
  };
  switch (e.type) {
    case 'message.updated':
      return p.info?.id ? upsertMessage(p.info) : messages;
    case 'message.removed':
      return messages.filter((m) => m.info.id !== p.messageID);
    case 'message.part.updated': {
      const part = p.part as Part | undefined;
      if (!part?.id || !part.messageID) return messages;
      return withPart(part.messageID, (parts) => {
        const j = parts.findIndex((x) => x.id === part.id);
        if (j < 0) return [...parts, part];
        const next = parts.slice();
        next[j] = part;
        return next;
      });
    }
    case 'message.part.delta': {
      if (!p.messageID || !p.partID || typeof p.delta !== 'string') return messages;
      const field = typeof p.field === 'string' ? p.field : 'text';
      return withPart(p.messageID, (parts) => {
        const j = parts.findIndex((x) => x.id === p.partID);
        if (j < 0) return [...parts, { id: p.partID, messageID: p.messageID, type: 'text', [field]: p.delta }];
        const next = parts.slice();
        next[j] = { ...next[j], [field]: `${(next[j][field] as string | undefined) ?? ''}${p.delta}` };
        return next;
      });
    }
    case 'message.part.removed':
      return p.messageID ? withPart(p.messageID, (parts) => parts.filter((x) => x.id !== p.partID)) : messages;
    default:
      return messages;
  }
}

/** History fetched after the stream already delivered some events: the stream's newer state wins. */
export function mergeHistory(history: Msg[], live: Msg[]): Msg[] {
  const byId = new Map(live.map((m) => [m.info.id, m]));
  const merged = history.map((m) => byId.get(m.info.id) ?? m);
  for (const m of live) if (!history.some((h) => h.info.id === m.info.id)) merged.push(m);
  return merged;
}
