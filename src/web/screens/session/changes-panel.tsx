import { useState } from 'preact/hooks';
import { api, explain } from '../../api';
import { ErrorNote, SettingText } from '../../components';
import { highlightLine, languageOf } from '../../highlight';
import type { PaneProps } from './workspace-pane';
import { useLoad } from '../../use-load';
import type { FileChange, ChangeSet } from '../../wire';
export type { ChangeSet };

const LETTER: Record<FileChange['status'], string> = { added: 'A', modified: 'M', deleted: 'D', renamed: 'R' };
const changesPath = (sessionId: string, messageId?: string) => `/sessions/${sessionId}/changes${messageId ? `?messageId=${encodeURIComponent(messageId)}` : ''}`;

/** The Changes tab: what the session (or one of its turns) changed in the workspace, file by file, with its diff. */
export function ChangesPanel(props: PaneProps) {
  const { sessionId, turnsEnded } = props;
  const [scope, setScope] = useState('');
  const [selected, setSelected] = useState<string | null>(null);
  // The whole session's changes, and those of the turn chosen (`scope`); both again when a turn ends.
  const whole = useLoad(() => api<ChangeSet>('GET', changesPath(sessionId)), [sessionId, turnsEnded]);
  const ofTurn = useLoad(() => (scope ? api<ChangeSet>('GET', changesPath(sessionId, scope)) : Promise.resolve(null)), [sessionId, scope, turnsEnded]);
  const session = whole.data;
  const turn = ofTurn.data;
  const error = whole.error ?? ofTurn.error;

  const shown = scope ? turn : session;
  const file = shown?.files.find((f) => f.path === selected) ?? shown?.files[0] ?? null;
  return (
    <div class="changes" data-testid="changes-panel">
      <ErrorNote
        error={error}
        onClose={() => {
          whole.setError(null);
          ofTurn.setError(null);
        }}
      />
      <div class="changes-head">
        <select aria-label="Changes of" value={scope} onChange={(e) => setScope(e.currentTarget.value)}>
          <option value="">Whole session</option>
          {session?.turns.map((t, i) => (
            <option value={t.messageId} key={t.messageId}>
              Turn {i + 1}: {t.files} {t.files === 1 ? 'file' : 'files'}
              {t.reverted ? ' (undone)' : ''}
            </option>
          ))}
        </select>
        {shown ? (
          <span class="counts">
            {shown.totals.files} {shown.totals.files === 1 ? 'file' : 'files'} <span class="plus">+{shown.totals.additions}</span> <span class="minus">−{shown.totals.deletions}</span>
          </span>
        ) : null}
      </div>
      {session?.reverted ? <p class="hint">{session.reverted.turns === 1 ? 'The last turn is undone: its changes are' : `The last ${session.reverted.turns} turns are undone: their changes are`} not counted in the whole session. Redo from the chat.</p> : null}
      {shown === null ? <p class="boot">Loading…</p> : null}
      {session && !session.snapshots ? <p class="hint">
          <SettingText text="This service keeps no snapshots of workspaces (AGENTWS_RUNTIME_SNAPSHOTS=off): what turns changed is not recorded." />
        </p> : null}
      {shown?.snapshots && shown.recorded === false ? <p class="hint">{scope ? "This turn's" : "This session's"} changes were not recorded (it ran before snapshots were on, or a snapshot failed).</p> : null}
      {shown?.pending ? <p class="hint">The snapshot after the last turn is still being taken: its changes show once it is.</p> : null}
      {shown?.notKept?.length ? <p class="hint">Not kept (larger than 10 MiB, so neither shown nor undone): {shown.notKept.slice(0, 5).join(', ')}{shown.notKept.length > 5 ? ` and ${shown.notKept.length - 5} more` : ''}</p> : null}
      {shown?.snapshots && shown.recorded !== false && !shown.pending && !shown.files.length ? <p class="empty">{scope ? 'This turn changed no file.' : 'No file changed in this session yet.'}</p> : null}
      {shown?.files.length ? (
        <ul class="change-files" role="listbox" aria-label="Changed files">
          {shown.files.map((f) => (
            <li key={f.path}>
              <button type="button" role="option" aria-selected={f === file} class={f === file ? 'on' : ''} onClick={() => setSelected(f.path)} data-testid="changed-file">
                <span class={`st st-${f.status}`} title={f.status}>
                  {LETTER[f.status]}
                </span>{' '}
                <span class="path">{f.from ? `${f.from} → ${f.path}` : f.path}</span> <span class="plus">+{f.additions}</span> <span class="minus">−{f.deletions}</span>
              </button>
            </li>
          ))}
        </ul>
      ) : null}
      {file ? <DiffView file={file} /> : null}
    </div>
  );
}

/** One file's unified diff, its lines coloured by the file's language and marked added or removed. */
function DiffView(props: { file: FileChange }) {
  const { file } = props;
  if (file.binary) return <p class="hint">{file.path} is a binary file: its contents are not shown.</p>;
  if (file.status === 'renamed') return <p class="hint">Renamed from {file.from}, its contents unchanged.</p>;
  if (!file.diff) return <p class="hint">The diff of {file.path} is too large to show here.</p>;
  const family = languageOf(file.path);
  // The `---`/`+++` head names the file, which the list above shows already.
  const lines = file.diff.split('\n').slice(2);
  if (lines.at(-1) === '') lines.pop();
  return (
    <>
      <pre class="diff-view" data-testid="diff">
        <code class={`hl hl-${family}`}>
          {lines.map((l, i) => {
            const kind = l.startsWith('@@') ? 'hunk' : l[0] === '+' ? 'add' : l[0] === '-' ? 'del' : l[0] === '\\' ? 'meta' : 'ctx';
            return (
              <span class={`dl ${kind}`} key={i}>
                {kind === 'hunk' || kind === 'meta' ? l : [l[0], ...highlightLine(l.slice(1), family)]}
              </span>
            );
          })}
        </code>
      </pre>
      {file.truncated ? <p class="hint">The diff was cut: it is larger than the dashboard shows.</p> : null}
    </>
  );
}

/**
 * The changes of a session's turns as the chat shows them under each prompt, with Undo and Redo. Loads
 * again when a turn ends (`turnsEnded`); `onChanged` after an undo or a redo (the transcript and the
 * workspace changed).
 */
export function useTurnChanges(sessionId: string, turnsEnded: number, onChanged: () => void) {
  // A failure to read them is not shown here (the Changes tab says it): the controls wait for an answer.
  const { data: set, setData: setSet } = useLoad(() => api<ChangeSet>('GET', changesPath(sessionId)), [sessionId, turnsEnded]);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const act = async (path: 'revert' | 'unrevert', body?: unknown) => {
    setBusy(true);
    setError(null);
    try {
      setSet(await api<ChangeSet>('POST', `/sessions/${sessionId}/${path}`, body ?? {}));
      onChanged();
    } catch (err) {
      setError(explain(err));
    } finally {
      setBusy(false);
    }
  };
  return { set, error, busy, clearError: () => setError(null), undo: (messageId: string) => act('revert', { messageId }), redo: () => act('unrevert') };
}

type TurnChanges = ReturnType<typeof useTurnChanges>;

/** Under a prompt: what its turn changed, and Undo (refused while a turn runs). */
export function TurnChangesNote(props: { changes: TurnChanges; messageId: string; running: boolean; canUndo: boolean }) {
  const set = props.changes.set;
  const t = set?.turns.find((x) => x.messageId === props.messageId);
  if (!set?.snapshots || !t || (!t.files && !props.canUndo)) return null;
  return (
    <div class="turn-changes" data-testid="turn-changes">
      {t.files ? (
        <span>
          Changed in this turn: {t.paths.slice(0, 3).join(', ')}
          {t.files > 3 ? ` and ${t.files - 3} more` : ''} <span class="plus">+{t.additions}</span> <span class="minus">−{t.deletions}</span>
        </span>
      ) : (
        <span class="muted">No file changed in this turn.</span>
      )}
      {props.canUndo ? (
        <button type="button" class="link" disabled={props.running || props.changes.busy} title={props.running ? 'A turn is running: undo once it has ended' : 'Undo this turn and every later one: the files and the conversation as before it'} onClick={() => props.changes.undo(t.messageId)}>
          Undo
        </button>
      ) : null}
    </div>
  );
}

/** At the end of the transcript while turns are undone: how many, and Redo (until the next prompt). */
export function RedoNote(props: { changes: TurnChanges; running: boolean; canUndo: boolean }) {
  const { set, error, busy, clearError, redo } = props.changes;
  return (
    <>
      <ErrorNote error={error} onClose={clearError} />
      {set?.reverted ? (
        <div class="turn-changes reverted" data-testid="redo-note">
          <span>
            {set.reverted.turns === 1 ? 'One turn is undone' : `${set.reverted.turns} turns are undone`}: your next message starts from here and drops {set.reverted.turns === 1 ? 'it' : 'them'}.
          </span>
          {props.canUndo ? (
            <button type="button" class="link" disabled={props.running || busy} onClick={redo}>
              Redo
            </button>
          ) : null}
        </div>
      ) : null}
    </>
  );
}
