import { useEffect, useRef, useState } from 'preact/hooks';
import { api, explain } from '../api';
import { ErrorNote, FieldError, FormError, useRefusal, when } from '../components';
import type { Me } from '../types';
import { exportUrl, listSessions, originHref, resultHref, searchSessions, snippetPieces, updateSession, type ListedSession, type ListView, type SearchResult } from '../sessions-api';
import { SetupChecklist, type SetupState } from './setup/checklist';
import { SharedWithMe } from './shared-with-me';
import { useLoad } from '../use-load';
import type { Template } from '../wire';

/**
 * The user's sessions: start one (from a template they may use); find one (search, filters, more pages);
 * open, rename, pin, archive or restore, export or delete one.
 */
export function SessionsScreen(props: { me: Me }) {
  const [sessions, setSessions] = useState<ListedSession[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const canCreate = props.me.permissions.agents.create;
  const [view, setView] = useState<ListView>('active');
  const [filterTemplate, setFilterTemplate] = useState('');
  const [title, setTitle] = useState('');
  const [template, setTemplate] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [query, setQuery] = useState('');
  const [results, setResults] = useState<SearchResult[] | null>(null);
  const searchSeq = useRef(0);
  // Whether the workspace can prompt yet: until it can, the first-run checklist instead of the form.
  const { data: setup, reload: checkSetup } = useLoad(() => api<SetupState>('GET', '/setup'));
  // The templates to start from, for those who may start sessions (a refusal is not shown: none offered).
  const templates = useLoad(() => (canCreate ? api<{ templates: Template[] }>('GET', '/templates').then((r) => r.templates) : Promise.resolve([]))).data ?? [];

  const load = async (more = false) => {
    try {
      const page = await listSessions(view, filterTemplate, more ? next : null);
      setSessions((list) => (more ? [...(list ?? []), ...page.sessions] : page.sessions));
      setNext(page.nextCursor);
    } catch (err) {
      setError(explain(err));
      setSessions((list) => list ?? []);
    }
  };
  useEffect(() => {
    void load();
  }, [view, filterTemplate]);

  const refusal = useRefusal(['title', 'template_slug']);
  // Searching as the person types (a moment after they stop); an older answer never replaces a newer one.
  useEffect(() => {
    const q = query.trim();
    if (!q) {
      setResults(null);
      return;
    }
    const seq = ++searchSeq.current;
    const timer = setTimeout(() => {
      searchSessions(q).then(
        (r) => seq === searchSeq.current && setResults(r.results),
        (err) => seq === searchSeq.current && setError(explain(err)),
      );
    }, 250);
    return () => clearTimeout(timer);
  }, [query]);

  const create = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    await refusal.run(async () => {
      const r = await api<{ sessionId: string }>('POST', '/sessions', { title: title.trim() || 'New session', ...(template ? { template_slug: template } : {}) });
      location.hash = `#/sessions/${r.sessionId}`;
    });
    setBusy(false);
  };

  const remove = async (s: ListedSession) => {
    if (!confirm(`Delete the session "${s.title}"? It leaves your list and search; the runtime keeps its transcript for a while.`)) return;
    try {
      await api('DELETE', `/sessions/${s.sessionId}`);
      setSessions((list) => (list ?? []).filter((x) => x.sessionId !== s.sessionId));
    } catch (err) {
      setError(explain(err));
    }
  };

  /** Applies a change; the list is read again when the change moves the session (pinned order, archived view). */
  const change = async (s: ListedSession, c: { title?: string; pinned?: boolean; archived?: boolean }) => {
    try {
      const updated = await updateSession(s.sessionId, c);
      if (c.pinned !== undefined || c.archived !== undefined) await load();
      else setSessions((list) => (list ?? []).map((x) => (x.sessionId === s.sessionId ? { ...x, ...updated } : x)));
      return true;
    } catch (err) {
      setError(explain(err));
      return false;
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

      <div class="row session-find">
        <label class="grow">
          Search
          <input type="search" name="q" value={query} onInput={(e) => setQuery(e.currentTarget.value)} placeholder="Words from titles, prompts or answers" maxLength={200} aria-label="Search your sessions" />
        </label>
        {results === null ? (
          <>
            <label>
              Show
              <select name="view" value={view} onChange={(e) => setView(e.currentTarget.value as ListView)}>
                <option value="active">Active</option>
                <option value="pinned">Pinned</option>
                <option value="archived">Archived</option>
                <option value="all">All</option>
              </select>
            </label>
            {templates.length ? (
              <label>
                Template
                <select name="filterTemplate" value={filterTemplate} onChange={(e) => setFilterTemplate(e.currentTarget.value)}>
                  <option value="">Any</option>
                  {templates.map((t) => (
                    <option value={t.slug}>{t.name}</option>
                  ))}
                </select>
              </label>
            ) : null}
          </>
        ) : null}
      </div>

      {results !== null ? (
        <SearchResults results={results} query={query.trim()} />
      ) : (
        <>
          {sessions === null ? <p class="boot">Loading…</p> : null}
          {sessions?.length === 0 ? (
            <p class="empty">
              {view === 'archived' ? 'No archived sessions.' : view === 'pinned' ? 'No pinned sessions.' : filterTemplate ? 'No sessions from this template.' : `No sessions yet.${canCreate && setup?.ready !== false ? ' Start one above: give it a title and press Enter.' : ''}`}
            </p>
          ) : null}
          {sessions?.length ? (
            <ul class="list session-list" aria-label="Your sessions">
              {sessions.map((s) => (
                <SessionRow key={s.sessionId} s={s} onChange={(c) => change(s, c)} onDelete={() => remove(s)} />
              ))}
            </ul>
          ) : null}
          {next ? (
            <button type="button" class="more" onClick={() => load(true)}>
              Load more
            </button>
          ) : null}
        </>
      )}
      <SharedWithMe />
    </section>
  );
}

function SessionRow(props: { s: ListedSession; onChange: (c: { title?: string; pinned?: boolean; archived?: boolean }) => Promise<boolean>; onDelete: () => void }) {
  const { s } = props;
  const [renaming, setRenaming] = useState(false);
  const [name, setName] = useState(s.title);
  const menu = useRef<HTMLDetailsElement>(null);
  const close = () => menu.current?.removeAttribute('open');
  const rename = async (e: Event) => {
    e.preventDefault();
    const t = name.trim();
    if (!t || t === s.title || (await props.onChange({ title: t }))) setRenaming(false);
  };
  return (
    <li class={s.archived ? 'archived' : undefined} data-testid="session-row">
      {renaming ? (
        <form class="rename" onSubmit={rename} aria-label={`Rename ${s.title}`}>
          <input name="title" value={name} onInput={(e) => setName(e.currentTarget.value)} maxLength={500} aria-label="New title" autoFocus />
          <button type="submit" class="primary">
            Save
          </button>
          <button type="button" class="link" onClick={() => setRenaming(false)}>
            Cancel
          </button>
        </form>
      ) : (
        <a href={`#/sessions/${s.sessionId}`}>
          {s.title}
          {s.pinned ? <small class="tag"> · pinned</small> : null}
          {s.archived ? <small class="tag"> · archived</small> : null}
        </a>
      )}
      {s.origin ? <Origin origin={s.origin} /> : null}
      <small>{when(s.updatedAt)}</small>
      <span class="actions">
        <button type="button" class="link" onClick={() => props.onChange({ pinned: !s.pinned })} aria-label={`${s.pinned ? 'Unpin' : 'Pin'} ${s.title}`}>
          {s.pinned ? 'Unpin' : 'Pin'}
        </button>
        {/* The rarer actions behind one control: a row stays two lines at a phone's width. */}
        <details class="menu" ref={menu}>
          <summary aria-label={`More actions for ${s.title}`}>More</summary>
          <div class="menu-items">
            <button type="button" class="link" onClick={() => { setName(s.title); setRenaming(true); close(); }} aria-label={`Rename ${s.title}`}>
              Rename
            </button>
            <button type="button" class="link" onClick={() => { close(); void props.onChange({ archived: !s.archived }); }} aria-label={`${s.archived ? 'Restore' : 'Archive'} ${s.title}`}>
              {s.archived ? 'Restore' : 'Archive'}
            </button>
            <a class="link" href={exportUrl(s.sessionId, 'markdown')} download aria-label={`Export ${s.title} as Markdown`}>
              Export Markdown
            </a>
            <a class="link" href={exportUrl(s.sessionId, 'json')} download aria-label={`Export ${s.title} as JSON`}>
              Export JSON
            </a>
            <button type="button" class="link danger" onClick={() => { close(); props.onDelete(); }} aria-label={`Delete ${s.title}`}>
              Delete
            </button>
          </div>
        </details>
      </span>
    </li>
  );
}

/**
 * Where a code host's comment or label started this session: the issue or pull request, in a
 * new tab. The URL came from the host's webhook payload: only an http(s) one is a link (originHref).
 */
function Origin(props: { origin: { url: string; label: string } }) {
  const href = originHref(props.origin.url);
  const body = (
    <>
      <svg class="icon" viewBox="0 0 16 16" width="12" height="12" aria-hidden="true">
        <circle cx="8" cy="8" r="6.5" fill="none" stroke="currentColor" stroke-width="1.5" />
        <circle cx="8" cy="8" r="1.6" fill="currentColor" />
      </svg>{' '}
      {props.origin.label}
    </>
  );
  return href ? (
    <a class="badge origin" href={href} target="_blank" rel="noopener noreferrer" title={`Started from ${props.origin.label}`} data-testid="session-origin">
      {body}
    </a>
  ) : (
    <span class="badge origin" data-testid="session-origin">
      {body}
    </span>
  );
}

function SearchResults(props: { results: SearchResult[]; query: string }) {
  if (!props.results.length) return <p class="empty">Nothing found for “{props.query}”. Search looks at titles and at the text of prompts and answers (not tool output).</p>;
  return (
    <ul class="list search-results" aria-label="Search results">
      {props.results.map((r) => (
        <li key={r.sessionId} data-testid="search-result">
          <a href={resultHref(r)}>
            <b>{r.title}</b>
            {r.archived ? <small class="tag"> · archived</small> : null}
            <span class="snippet">
              {r.role === 'title' ? null : <small class="who">{r.role === 'user' ? 'You: ' : 'Agent: '}</small>}
              {snippetPieces(r.snippet, r.highlights).map((p) => (p.hit ? <mark>{p.text}</mark> : p.text))}
            </span>
          </a>
          <small>{when(r.updatedAt)}</small>
        </li>
      ))}
    </ul>
  );
}
