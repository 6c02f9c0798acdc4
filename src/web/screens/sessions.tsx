import { useEffect, useState } from 'preact/hooks';
import { api, explain } from '../api';
import { ErrorNote, FieldError, FormError, useRefusal, when } from '../components';
import type { Me, SessionItem } from '../types';
import { SetupChecklist, type SetupState } from './setup-checklist';
import { SharedWithMe } from './shared-with-me';

interface Template {
  slug: string;
  name: string;
}

/** The user's sessions: open one, start one (from a template they may use), delete one. */
export function SessionsScreen(props: { me: Me }) {
  const [sessions, setSessions] = useState<SessionItem[] | null>(null);
  const [templates, setTemplates] = useState<Template[]>([]);
  const [title, setTitle] = useState('');
  const [template, setTemplate] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // Whether the workspace can prompt yet: until it can, the first-run checklist instead of the form.
  const [setup, setSetup] = useState<SetupState | null>(null);
  const checkSetup = () => api<SetupState>('GET', '/setup').then(setSetup, () => {});
  const canCreate = props.me.permissions.agents.create;

  const load = async () => {
    try {
      setSessions((await api<{ sessions: SessionItem[] }>('GET', '/sessions')).sessions);
    } catch (err) {
      setError(explain(err));
      setSessions([]);
    }
  };
  useEffect(() => {
    void load();
    void checkSetup();
    if (canCreate) void api<{ templates: Template[] }>('GET', '/templates').then((r) => setTemplates(r.templates), () => {});
  }, []);

  const refusal = useRefusal(['title', 'template_slug']);
  const create = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    await refusal.run(async () => {
      const r = await api<{ sessionId: string }>('POST', '/sessions', { title: title.trim() || 'New session', ...(template ? { template_slug: template } : {}) });
      location.hash = `#/sessions/${r.sessionId}`;
    });
    setBusy(false);
  };

  const remove = async (s: SessionItem) => {
    if (!confirm(`Delete the session "${s.title}"? It leaves your list; the runtime keeps its transcript for a while.`)) return;
    try {
      await api('DELETE', `/sessions/${s.sessionId}`);
      setSessions((list) => (list ?? []).filter((x) => x.sessionId !== s.sessionId));
    } catch (err) {
      setError(explain(err));
    }
  };

  return (
    <section class="sessions">
      <h1>Sessions</h1>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {setup && !setup.ready ? <SetupChecklist setup={setup} onCheck={checkSetup} /> : null}
      {canCreate && (!setup || setup.ready) ? (
        <form class="row" onSubmit={create} aria-label="New session">
          <label>
            Title <input name="title" value={title} onInput={(e) => setTitle(e.currentTarget.value)} placeholder="What are you working on?" maxLength={200} aria-invalid={refusal.at('title') ? true : undefined} />
            <FieldError message={refusal.at('title')} />
          </label>
          {templates.length ? (
            <label>
              Template
              <select name="template" value={template} onChange={(e) => setTemplate(e.currentTarget.value)}>
                <option value="">None</option>
                {templates.map((t) => (
                  <option value={t.slug}>{t.name}</option>
                ))}
              </select>
              <FieldError message={refusal.at('template_slug')} />
            </label>
          ) : null}
          <button type="submit" class="primary" disabled={busy}>
            New session
          </button>
          <FormError message={refusal.general} />
        </form>
      ) : canCreate ? null : (
        <p class="hint">Your role cannot start agent sessions.</p>
      )}
      {sessions === null ? <p class="boot">Loading…</p> : null}
      {sessions?.length === 0 ? <p class="empty">No sessions yet.{canCreate && setup?.ready !== false ? ' Start one above: give it a title and press Enter.' : ''}</p> : null}
      {sessions?.length ? (
        <ul class="list" aria-label="Your sessions">
          {sessions.map((s) => (
            <li key={s.sessionId}>
              <a href={`#/sessions/${s.sessionId}`}>{s.title}</a>
              <small>{when(s.updatedAt)}</small>
              <button type="button" class="link danger" onClick={() => remove(s)} aria-label={`Delete ${s.title}`}>
                Delete
              </button>
            </li>
          ))}
        </ul>
      ) : null}
      <SharedWithMe />
    </section>
  );
}
