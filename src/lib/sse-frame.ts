/**
 * One Server-Sent Events message (the text/event-stream format): `event:` when named, `id:` when given,
 * the data as one line of JSON, a blank line. The one place the format is written: the session stream
 * keeps its frames for replay, the HTTP helper (src/http/sse.ts) writes them.
 */
export function sseFrame(m: { event?: string; id?: string; data: unknown }): string {
  return `${m.event ? `event: ${m.event}\n` : ''}${m.id !== undefined ? `id: ${m.id}\n` : ''}data: ${JSON.stringify(m.data)}\n\n`;
}

/** A comment line: ignored by clients, it keeps proxies and idle timers from closing the stream. */
export const sseComment = (text: string) => `: ${text}\n\n`;
