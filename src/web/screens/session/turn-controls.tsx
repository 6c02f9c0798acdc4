import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, explain } from '../../api';

/** A prompt sent while the agent was busy: shown until the agent has it, and withdrawable until then. */
export interface QueuedPrompt {
  turnId: string;
  messageId: string;
  text: string;
}

/**
 * Stopping the running turn (the Stop button, or Escape anywhere on the chat screen) and the prompts still
 * queued behind it (each withdrawable until it reaches the agent). The chat tells it what it sent and what
 * the transcript holds.
 */
export function useTurnControls(sessionId: string, running: boolean, onError: (message: string) => void, onIdle: () => void) {
  const [queued, setQueued] = useState<QueuedPrompt[]>([]);
  const [stopping, setStopping] = useState(false);

  const stop = async () => {
    if (stopping) return;
    setStopping(true);
    try {
      const r = await api<{ stopped: boolean; withdrawn: boolean }>('POST', `/sessions/${sessionId}/stop`);
      // Nothing ran (or the prompt never reached the agent): no end of a turn will come on the stream.
      if (!r.stopped || r.withdrawn) onIdle();
    } catch (err) {
      onError(explain(err));
    } finally {
      setStopping(false);
    }
  };

  const withdraw = async (q: QueuedPrompt) => {
    try {
      await api('DELETE', `/sessions/${sessionId}/turns/${q.turnId}`);
    } catch (err) {
      // Sent meanwhile: it is the agent's now (stop it instead).
      if (!(err instanceof ApiError && err.status === 409)) return onError(explain(err));
    }
    setQueued((list) => list.filter((x) => x.turnId !== q.turnId));
  };

  // Escape stops the turn, wherever the focus is on this screen (a dialog that is open takes it first).
  useEffect(() => {
    if (!running) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== 'Escape' || e.defaultPrevented || e.isComposing || document.querySelector('dialog[open]')) return;
      e.preventDefault();
      void stop();
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, [running, sessionId, stopping]);

  return {
    queued,
    stopping,
    stop,
    withdraw,
    /** A prompt the service accepted while a turn ran. */
    sent: (q: QueuedPrompt) => setQueued((list) => [...list, q]),
    /** The transcript's message ids: a queued prompt that is there has reached the agent. */
    arrived: (ids: Set<string>) => setQueued((list) => (list.some((q) => ids.has(q.messageId)) ? list.filter((q) => !ids.has(q.messageId)) : list)),
    /** A turn withdrawn (here or in another tab). */
    withdrawn: (turnId: string) => setQueued((list) => list.filter((q) => q.turnId !== turnId)),
  };
}

export function StopButton(props: { onStop: () => void; stopping: boolean }) {
  return (
    <button type="button" class="danger stop" onClick={props.onStop} disabled={props.stopping} title="Stop the agent (Esc)" data-testid="stop">
      {props.stopping ? 'Stopping…' : 'Stop'}
    </button>
  );
}

export function QueuedPrompts(props: { queued: QueuedPrompt[]; onWithdraw: (q: QueuedPrompt) => void }) {
  if (!props.queued.length) return null;
  return (
    <ul class="queued" aria-label="Queued prompts">
      {props.queued.map((q) => (
        <li key={q.turnId} data-testid="queued">
          <span class="label">Queued:</span> <span class="text">{q.text.length > 120 ? `${q.text.slice(0, 120)}…` : q.text}</span>
          <button type="button" class="link" onClick={() => props.onWithdraw(q)}>
            Withdraw
          </button>
        </li>
      ))}
    </ul>
  );
}
