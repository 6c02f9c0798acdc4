import type { Logger } from '../../kernel/logger.js';
import { openRuntimeStream, type RuntimeEndpoint } from './host/runtime-transport.js';

/** One event of the runtime, as it arrives on `/global/event`. */
export interface RuntimeEvent {
  /** The project directory the event belongs to (our per-user workspace). */
  directory?: string;
  payload: { id?: string; type: string; properties: Record<string, any> };
}

export interface RuntimeEventStream {
  /** Resolves once the first connection has been attempted. */
  readonly connected: boolean;
  close(): Promise<void>;
}

/**
 * Holds ONE connection to a runtime's instance-wide event stream (`GET /global/event`: every session of
 * that user's runtime) and hands each event to `onEvent`, in order. Reconnects with back-off when the
 * stream ends or the runtime restarts (`endpoint` answers where it is now, null while it restarts);
 * `onConnect(first=false)` tells the caller that events may have been missed. The runtime's stream has
 * no replay, which is why our own SSE layer keeps a buffer per session.
 */
export function openRuntimeEventStream(deps: {
  endpoint: () => RuntimeEndpoint | null;
  log: Logger;
  onEvent: (event: RuntimeEvent) => void;
  onConnect?: (first: boolean) => void;
}): RuntimeEventStream {
  const { log } = deps;
  let closed = false;
  let connected = false;
  let controller: AbortController | null = null;
  let attempts = 0;
  let everConnected = false;
  let wake: (() => void) | null = null;

  const run = async () => {
    while (!closed) {
      controller = new AbortController();
      try {
        const ep = deps.endpoint();
        if (!ep) throw new Error('the runtime is restarting');
        const res = await openRuntimeStream(ep, '/global/event', controller.signal);
        if (res.statusCode !== 200) {
          res.resume();
          throw new Error(`HTTP ${res.statusCode}`);
        }
        connected = true;
        attempts = 0;
        deps.onConnect?.(!everConnected);
        everConnected = true;
        const decoder = new TextDecoder();
        let buf = '';
        for await (const chunk of res as AsyncIterable<Uint8Array>) {
          buf += decoder.decode(chunk, { stream: true });
          let end: number;
          while ((end = buf.indexOf('\n\n')) >= 0) {
            const frame = buf.slice(0, end);
            buf = buf.slice(end + 2);
            const data = dataOf(frame);
            if (!data) continue;
            let event: RuntimeEvent;
            try {
              event = JSON.parse(data);
            } catch {
              log.warn({ frame: frame.slice(0, 200) }, 'unparseable runtime event');
              continue;
            }
            if (!event?.payload?.type) continue;
            try {
              deps.onEvent(event);
            } catch (err) {
              log.error({ err: (err as Error).message, type: event.payload.type }, 'runtime event handler failed');
            }
          }
        }
        if (!closed) log.warn('runtime event stream ended; reconnecting');
      } catch (err) {
        if (closed) break;
        if (attempts === 0 || attempts % 20 === 0) log.warn({ err: (err as Error).message }, 'runtime event stream unavailable; retrying');
      }
      connected = false;
      if (closed) break;
      const delay = Math.min(5000, 100 * 2 ** Math.min(attempts++, 6));
      await new Promise<void>((r) => {
        const timer = setTimeout(r, delay);
        wake = () => {
          clearTimeout(timer);
          r();
        };
      });
      wake = null;
    }
  };
  const done = run();

  return {
    get connected() {
      return connected;
    },
    async close() {
      closed = true;
      controller?.abort();
      wake?.();
      await done.catch(() => {});
    },
  };
}

function dataOf(frame: string): string {
  // The runtime writes one `data:` line per event; join several the way the SSE spec says.
  if (frame.startsWith('data: ') && !frame.includes('\n')) return frame.slice(6);
  return frame
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(l.startsWith('data: ') ? 6 : 5))
    .join('\n');
}
