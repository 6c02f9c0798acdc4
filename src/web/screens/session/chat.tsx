import { Fragment } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, explain, follow, type StreamEvent } from '../../api';
import { ErrorNote, SettingText, usd } from '../../components';
import { applyEvent, mergeHistory, type Msg } from '../../transcript';
import type { Me, PendingPermission } from '../../types';
import { RedoNote, TurnChangesNote, useTurnChanges } from './changes-panel';
import { Markdown } from '../../markdown';
import { ToolCard } from './tool-card';
import { QueuedPrompts, StopButton, useTurnControls } from './turn-controls';
import { WorkspacePane } from './workspace-pane';
import { answerModel, branchSession } from '../../models-api';
import { ModelPicker, useModelPicker } from './model-picker';

/** Where a branch's note waits for the branch's own screen (the dashboard moves there). */
const BRANCHED_KEY = 'agentws.branched';
import { modeText, personName, type SessionAccess } from '../../shares-api';
import { HandOverDialog, ShareDialog } from './share-dialog';

/** One session: its transcript (streamed as it comes), pending permission requests, and the composer. */
export function ChatScreen(props: { me: Me; sessionId: string; access?: SessionAccess; onAccessChanged?: () => void }) {
  const { sessionId } = props;
  // Somebody else's session shared with this person: read-only (no composer, stop, permissions or workspace);
  // shared as of a moment, no stream either.
  const readOnly = props.access?.role === 'viewer';
  const [dialog, setDialog] = useState<'share' | 'handover' | null>(null);
  const stopFollowing = useRef<() => void>(() => {});
  const [messages, setMessages] = useState<Msg[] | null>(null);
  const [title, setTitle] = useState<string | null>(null);
  const [pending, setPending] = useState<PendingPermission[]>([]);
  const [running, setRunning] = useState(false);
  const [turnsEnded, setTurnsEnded] = useState(0);
  const [connected, setConnected] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [text, setText] = useState('');
  const [files, setFiles] = useState<File[]>([]);
  const [sending, setSending] = useState(false);
  const bottom = useRef<HTMLDivElement>(null);
  const fileInput = useRef<HTMLInputElement>(null);
  const turn = useTurnControls(sessionId, running, setError, () => setRunning(false));
  const picker = useModelPicker(sessionId, setError);

  // After an undo or a redo the transcript is read again whole (undone turns leave it), and the tabs reload.
  const changes = useTurnChanges(sessionId, turnsEnded, () => {
    void api<{ messages: Msg[] }>('GET', `/sessions/${sessionId}/messages`).then((r) => setMessages(r.messages), (err) => setError(explain(err)));
    setTurnsEnded((n) => n + 1);
  });
  const canUndo = props.me.permissions.agents.create && !readOnly;

  const loadPending = () =>
    api<{ permissions: PendingPermission[] }>('GET', `/sessions/${sessionId}/permissions`).then(
      (r) => setPending(r.permissions),
      () => {},
    );

  // Tokens arrive in bursts (a model streams faster than a screen refreshes): the events of one frame are
  // applied together, one render per frame rather than one per token.
  const queued = useRef<StreamEvent[]>([]);
  const queueMessageEvent = (e: StreamEvent) => {
    queued.current.push(e);
    if (queued.current.length > 1) return;
    requestAnimationFrame(() => {
      const batch = queued.current;
      queued.current = [];
      // A cold start's notices ("Starting your agent…") stay until the answer itself starts.
      if (batch.some((x) => x.type === 'message.part.delta')) setNotice(null);
      setMessages((list) => batch.reduce(applyEvent, list ?? []));
    });
  };

  useEffect(() => {
    // Just branched here: what the branch means for the person's files, said once.
    const branched = sessionStorage.getItem(BRANCHED_KEY);
    if (branched?.startsWith(`${sessionId} `)) {
      sessionStorage.removeItem(BRANCHED_KEY);
      setNotice(branched.slice(sessionId.length + 1));
    }
    let live = true;
    api<{ messages: Msg[]; session?: { title: string } }>('GET', `/sessions/${sessionId}/messages`).then(
      (r) => {
        if (!live) return;
        if (r.session) setTitle(r.session.title);
        setMessages((now) => (now && now.length ? mergeHistory(r.messages, now) : r.messages));
      },
      (err) => {
        if (!live) return;
        setError(explain(err));
        setMessages((now) => now ?? []);
      },
    );
    const stop = !live ? () => {} : follow(
      `/sessions/${sessionId}/events`,
      (e) => {
        switch (e.type) {
          // The owner stopped sharing it: the stream ends here, what was read stays on screen.
          case 'share.revoked':
            stopFollowing.current();
            setConnected(false);
            setError(e.properties.message ?? 'The owner stopped sharing this session with you.');
            return;
          // Handed over (to this person, or away from them): what they may do with it changed.
          case 'session.handed_over':
            props.onAccessChanged?.();
            return;
          case 'permission.asked':
            setPending((list) => (list.some((x) => x.id === e.properties.id) ? list : [...list, { id: e.properties.id, sessionId: e.properties.sessionID, permission: e.properties.permission, patterns: e.properties.patterns ?? [], askedAt: new Date().toISOString() }]));
            return;
          case 'permission.replied':
            setPending((list) => list.filter((x) => x.id !== e.properties.requestID));
            return;
          case 'session.status':
            setRunning(e.properties.status?.type !== 'idle');
            return;
          case 'session.idle':
            setRunning(false);
            setNotice(null);
            setTurnsEnded((n) => n + 1);
            return;
          // Stopped (here, in another tab, through the API): said plainly; the runtime's "aborted" that follows is no error.
          case 'turn.stopped':
            setNotice(e.properties.by?.userId === props.me.user.id ? 'Stopped.' : (e.properties.message ?? 'Stopped.'));
            return;
          case 'turn.withdrawn':
            turn.withdrawn(e.properties.turnId);
            return;
          case 'session.error':
            if (e.properties.error?.name !== 'MessageAbortedError') setError(e.properties.error?.message ?? e.properties.error?.data?.message ?? 'The turn failed.');
            setRunning(false);
            setTurnsEnded((n) => n + 1);
            return;
          // The agent was placed on another host without this session's files (its runner was lost): kept in view.
          case 'runtime.moved':
            setError(e.properties.message ?? 'Your agent now runs on another host.');
            return;
          // The person's own git connection could not be used; the service's account stood in (kept in view).
          case 'git.credential_fallback':
            setError(e.properties.message ?? `Your connection to ${e.properties.host} could not be used; your agent's git requests go as the organisation's account.`);
            return;
          // A limit the agent met (memory, processes, its workspace's quota): kept in view, like an error.
          case 'runtime.limit':
            setError(e.properties.message ?? 'Your agent met one of its limits.');
            return;
          case 'runtime.waiting':
            setNotice(e.properties.message ?? 'Waiting for a free runtime…');
            return;
          // A prompt waits for an earlier one of this session, or goes again after the service restarted.
          case 'turn.waiting':
            setNotice(e.properties.message ?? 'Your prompt waits for the one before it…');
            return;
          // What a cold start is doing, so its seconds do not look like a hang.
          case 'runtime.starting':
          case 'runtime.started':
          case 'turn.sent':
            setNotice(e.properties.message ?? 'Starting your agent…');
            return;
          case 'session.deleted':
            location.hash = '#/sessions';
            return;
        }
        if (e.type.startsWith('message.')) queueMessageEvent(e);
      },
      (open) => {
        setConnected(open);
        // Requests asked while the stream was away are not replayed forever: ask the service.
        if (open && !readOnly) void loadPending();
      },
    );
    stopFollowing.current = stop;
    if (!readOnly) void loadPending();
    return () => {
      live = false;
      stop();
    };
  }, [sessionId]);

  // A search result opens the session at the message it matched (#/sessions/<id>?m=<messageId>): once.
  const jumpTo = useRef(new URLSearchParams(location.hash.split('?')[1] ?? '').get('m'));
  useEffect(() => {
    const target = jumpTo.current && messages ? document.getElementById(`m-${jumpTo.current}`) : null;
    if (messages) jumpTo.current = null;
    if (target) {
      target.scrollIntoView({ block: 'center' });
      target.classList.add('found');
    } else if (!jumpTo.current) bottom.current?.scrollIntoView({ block: 'end' });
    if (messages && turn.queued.length) turn.arrived(new Set(messages.map((m) => m.info.id)));
  }, [messages]);

  const turnCost = useMemo(() => {
    if (!messages) return 0;
    const lastUser = messages.map((m) => m.info.role).lastIndexOf('user');
    return messages.slice(lastUser + 1).reduce((n, m) => n + (m.info.cost ?? 0), 0);
  }, [messages]);

  const send = async (e?: Event) => {
    e?.preventDefault();
    if (!text.trim() && !files.length) return;
    setSending(true);
    setError(null);
    try {
      let accepted: { turnId: string; messageId: string };
      if (files.length) {
        const form = new FormData();
        form.append('text', text);
        form.append('agent', 'build');
        if (picker.once) form.append('model', picker.once);
        for (const f of files) form.append('files', f, f.name);
        accepted = await api('POST', `/sessions/${sessionId}/prompt`, form);
      } else {
        accepted = await api('POST', `/sessions/${sessionId}/prompt`, { text, agent: 'build', ...(picker.once ? { model: picker.once } : {}) });
      }
      picker.sent();
      // Sent while the agent works: it waits behind the running turn, withdrawable until the agent has it.
      if (running && !messages?.some((m) => m.info.id === accepted.messageId)) turn.sent({ ...accepted, text: text || files.map((f) => f.name).join(', ') });
      setText('');
      setFiles([]);
      if (fileInput.current) fileInput.current.value = '';
      setRunning(true);
    } catch (err) {
      setError(explain(err));
    } finally {
      setSending(false);
    }
  };

  const answer = async (p: PendingPermission, response: 'once' | 'always' | 'reject') => {
    try {
      await api('POST', `/sessions/${sessionId}/permissions/${encodeURIComponent(p.id)}`, { response });
      setPending((list) => list.filter((x) => x.id !== p.id));
    } catch (err) {
      setError(explain(err));
      void loadPending();
    }
  };

  const branch = async (messageId: string) => {
    try {
      const b = await branchSession(sessionId, messageId);
      sessionStorage.setItem(BRANCHED_KEY, `${b.sessionId} ${b.message}`);
      location.hash = `#/sessions/${b.sessionId}`;
    } catch (err) {
      setError(explain(err));
    }
  };

  const plan = async () => {
    const task = prompt('What should the agents do? The task is split into subtasks that run in parallel.');
    if (!task?.trim()) return;
    try {
      await api('POST', '/orchestrate', { parentSessionId: sessionId, taskDescription: task.trim() });
      location.hash = '#/plans';
    } catch (err) {
      setError(explain(err));
    }
  };

  return (
    <div class="chat-layout">
      <section class="chat">
        {title !== null ? <h1 class="chat-title" data-testid="session-title">{title}</h1> : null}
        <div class="chat-head">
          <a href="#/sessions">← Sessions</a>
          <span class={`dot ${connected ? 'on' : 'off'}`} title={connected ? 'Live' : 'Reconnecting…'} aria-label={connected ? 'Live' : 'Reconnecting'} />
          {running ? <span class="status">Working…</span> : null}
          {running && props.me.permissions.agents.create && !readOnly ? <StopButton onStop={turn.stop} stopping={turn.stopping} /> : null}
          {turnCost > 0 ? <span class="cost" data-testid="turn-cost">This turn: {usd(turnCost)}</span> : null}
          {props.me.permissions.agents.create && !readOnly ? (
            <button type="button" class="link" onClick={plan}>
              Plan a task…
            </button>
          ) : null}
          {props.access?.role === 'owner' ? (
            <button type="button" class="link" onClick={() => setDialog('share')}>
              Share…
            </button>
          ) : null}
          {props.access?.role === 'owner' && props.me.permissions.agents.create ? (
            <button type="button" class="link" onClick={() => setDialog('handover')}>
              Hand over…
            </button>
          ) : null}
        </div>
        {readOnly && props.access ? (
          <p class="notice read-only" data-testid="read-only">
            Read-only: shared with you by {personName(props.access.owner)}, {modeText(props.access.mode ?? 'live', props.access.asOf ?? '')}.
          </p>
        ) : null}
        {dialog === 'share' ? <ShareDialog sessionId={sessionId} onClose={() => setDialog(null)} /> : null}
        {dialog === 'handover' ? (
          <HandOverDialog
            sessionId={sessionId}
            onClose={() => setDialog(null)}
            onDone={() => {
              setDialog(null);
              props.onAccessChanged?.();
            }}
          />
        ) : null}
        <div class="transcript" aria-live="polite">
          {messages === null ? <p class="boot">Loading…</p> : null}
          {messages?.length === 0 ? <p class="empty">No messages yet. Ask the agent something below.</p> : null}
          {messages?.map((m) => (
            <Fragment key={m.info.id}>
              <MessageView m={m} onBranch={canUndo && !running && m.info.role === 'assistant' && m.info.time?.completed ? () => void branch(m.info.id) : undefined} />
              {m.info.role === 'user' ? <TurnChangesNote changes={changes} messageId={m.info.id} running={running} canUndo={canUndo} /> : null}
            </Fragment>
          ))}
          <RedoNote changes={changes} running={running} canUndo={canUndo} />
          <div ref={bottom} />
        </div>
        <QueuedPrompts queued={turn.queued} onWithdraw={turn.withdraw} />
        <ErrorNote error={error} onClose={() => setError(null)} />
        {notice ? (
          <p class="notice">
            <SettingText text={notice} />
          </p>
        ) : null}
        {pending.length && !readOnly ? (
          <div class="permissions" role="region" aria-label="Permission requests">
            {pending.map((p) => (
              <div class="permission" key={p.id} data-testid="permission">
                <span>
                  The agent asks to run <b>{p.permission}</b>
                  {p.patterns.length ? (
                    <>
                      : <code>{p.patterns.join(' ')}</code>
                    </>
                  ) : null}
                </span>
                <button type="button" class="primary" onClick={() => answer(p, 'once')}>
                  Allow once
                </button>
                <button type="button" onClick={() => answer(p, 'always')}>
                  Always
                </button>
                <button type="button" class="danger" onClick={() => answer(p, 'reject')}>
                  Reject
                </button>
              </div>
            ))}
          </div>
        ) : null}
        {!readOnly && props.me.permissions.agents.create ? <ModelPicker picker={picker} /> : null}
        {readOnly ? null : props.me.permissions.agents.create ? (
          <form class="composer" onSubmit={send}>
            <textarea
              name="prompt"
              aria-label="Message"
              placeholder="Ask the agent… (Enter sends, Shift+Enter for a new line)"
              value={text}
              onInput={(e) => setText(e.currentTarget.value)}
              onKeyDown={(e) => {
                if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
                  e.preventDefault();
                  void send();
                }
              }}
            />
            <label class="attach button" title="Attach files">
              Attach files
              <input ref={fileInput} type="file" multiple onChange={(e) => setFiles(Array.from(e.currentTarget.files ?? []))} />
            </label>
            {files.length ? <small class="files">{files.map((f) => f.name).join(', ')}</small> : null}
            <button type="submit" class="primary" disabled={sending}>
              Send
            </button>
          </form>
        ) : (
          <p class="hint">Your role can read this session but not prompt the agent.</p>
        )}
      </section>
      {readOnly ? null : <WorkspacePane me={props.me} sessionId={sessionId} running={running} turnsEnded={turnsEnded} />}
    </div>
  );
}

function MessageView(props: { m: Msg; onBranch?: () => void }) {
  const { info, parts } = props.m;
  const stopped = info.error?.name === 'MessageAbortedError';
  const failed = info.error && !stopped ? (info.error.data?.message ?? info.error.message ?? info.error.name) : null;
  return (
    <article class={`msg ${info.role}`} id={`m-${info.id}`} data-testid={`msg-${info.role}`}>
      {parts.map((p) => (p.type === 'text' ? (info.role === 'assistant' ? <Markdown key={p.id} text={p.text ?? ''} frontMatter={false} class="text md" /> : <p class="text" key={p.id}>{p.text}</p>) : p.type === 'tool' ? <ToolCard key={p.id} part={p} /> : p.type === 'file' ? <p class="file" key={p.id}>📎 {String((p as any).filename ?? 'file')}</p> : null))}
      {failed ? (
        <p class="error">
          <SettingText text={failed} />
        </p>
      ) : null}
      {stopped ? <p class="stopped">Stopped.</p> : null}
      {info.role === 'assistant' ? (
        <div class="msg-foot">
          {answerModel(info) ? <small class="model" data-testid="answer-model">{answerModel(info)}</small> : null}
          {info.cost ? <small class="cost">{usd(info.cost)}</small> : null}
          {props.onBranch ? (
            <button type="button" class="link" title="A new session with this conversation up to here. It shares your workspace: files stay as they are now." onClick={props.onBranch}>
              Branch from here
            </button>
          ) : null}
        </div>
      ) : null}
    </article>
  );
}
