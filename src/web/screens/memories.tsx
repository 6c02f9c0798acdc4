import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { changer, ErrorNote, FieldError, FormError, useRefusal, when } from '../components';
import type { Me } from '../types';
import type { Memory } from '../wire';

/** Why a quarantined memory waits for its author: what it reads like, or the tenant's hold on agent saves. */
function heldBecause(m: Memory): string {
  return m.signals?.length
    ? `Quarantined: it reads like instructions to a model (${m.signals.join(', ')}), so no agent sees it until you release it.`
    : 'Held for your release: your organisation keeps every memory an agent saves away from every agent until its person releases it.';
}

const KINDS = ['fact', 'preference', 'event', 'skill-note'];
const VISIBILITIES = ['private', 'team', 'org'] as const;

/** Search, filter, write, share and delete memories; release the ones the agent saved that were quarantined or held. */
export function MemoriesScreen(props: { me: Me }) {
  const p = props.me.permissions.memory;
  const [memories, setMemories] = useState<Memory[] | null>(null);
  const [mode, setMode] = useState<string | undefined>();
  const [filters, setFilters] = useState({ q: '', kind: '', visibility: '' });
  const [draft, setDraft] = useState({ kind: 'fact', content: '', visibility: 'private' });
  const [error, setError] = useState<string | null>(null);

  const search = useRefusal(['q', 'kind', 'visibility']);
  const load = async (e?: Event) => {
    e?.preventDefault();
    const q = new URLSearchParams({ limit: '100' });
    for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
    await search.run(async () => {
      const r = await api<{ memories: Memory[]; searchMode?: string }>('GET', `/memories?${q}`);
      setMemories(r.memories);
      setMode(r.searchMode);
    });
  };
  useEffect(() => {
    void load();
  }, []);

  const run = changer(load, setError);
  const refusal = useRefusal(['kind', 'content', 'visibility']);
  const create = (e: Event) => {
    e.preventDefault();
    if (!draft.content.trim()) return refusal.say('Write what to remember.', 'content');
    void refusal.run(async () => {
      await api('POST', '/memories', draft);
      setDraft({ ...draft, content: '' });
      await load();
    });
  };
  const mine = (m: Memory) => m.author.id === props.me.user.id;
  // A refused change (a shared memory that reads like instructions: 422) must not leave the select showing it.
  const reloadOnFailure = (change: Promise<unknown>) =>
    change.catch(async (err) => {
      await load();
      throw err;
    });

  return (
    <section class="memories">
      <h1>Memories</h1>
      <ErrorNote error={error} onClose={() => setError(null)} />
      <form class="row" onSubmit={load} aria-label="Search memories">
        <label>
          Search <input type="search" name="q" value={filters.q} aria-invalid={search.at('q') ? true : undefined} onInput={(e) => setFilters({ ...filters, q: e.currentTarget.value })} />
          <FieldError message={search.at('q')} />
        </label>
        <label>
          Kind
          <select value={filters.kind} onChange={(e) => setFilters({ ...filters, kind: e.currentTarget.value })}>
            <option value="">Any</option>
            {KINDS.map((k) => (
              <option value={k}>{k}</option>
            ))}
          </select>
        </label>
        <label>
          Visibility
          <select value={filters.visibility} onChange={(e) => setFilters({ ...filters, visibility: e.currentTarget.value })}>
            <option value="">Any</option>
            {VISIBILITIES.map((v) => (
              <option value={v}>{v}</option>
            ))}
          </select>
        </label>
        <button type="submit">Search</button>
        {mode ? <small class="hint">answered by {mode} search</small> : null}
        <FormError message={search.general} />
      </form>
      {p.write ? (
        <form class="row" onSubmit={create} aria-label="New memory">
          <label>
            Kind
            <select value={draft.kind} onChange={(e) => setDraft({ ...draft, kind: e.currentTarget.value })}>
              {KINDS.map((k) => (
                <option value={k}>{k}</option>
              ))}
            </select>
          </label>
          <label class="grow">
            Remember <input name="content" value={draft.content} maxLength={8000} aria-invalid={refusal.at('content') ? true : undefined} onInput={(e) => setDraft({ ...draft, content: e.currentTarget.value })} placeholder="e.g. I prefer tabs" />
            <FieldError message={refusal.at('content')} />
          </label>
          {p.share ? (
            <label>
              Visible to
              <select value={draft.visibility} onChange={(e) => setDraft({ ...draft, visibility: e.currentTarget.value })}>
                {VISIBILITIES.map((v) => (
                  <option value={v}>{v}</option>
                ))}
              </select>
            </label>
          ) : null}
          <button type="submit" class="primary">
            Save
          </button>
          <FormError message={refusal.general} />
        </form>
      ) : null}
      {memories?.length === 0 ? <p class="empty">No memories{filters.q || filters.kind || filters.visibility ? ' match' : ' yet'}.</p> : null}
      <ul class="list" aria-label="Memories">
        {memories?.map((m) => (
          <li key={m.id} data-testid="memory">
            <span class="grow">
              {m.content}
              <br />
              <small>
                {m.kind} · {m.visibility} · {m.author.handle}
                {m.source === 'agent' ? ' · saved by the agent' : ''} · {when(m.createdAt)}
              </small>
              {m.status === 'quarantined' ? <div class="warn">{heldBecause(m)}</div> : null}
            </span>
            {mine(m) && m.status === 'quarantined' ? (
              <button type="button" onClick={() => run(() => api('POST', `/memories/${m.id}/release`))}>
                Release
              </button>
            ) : null}
            {mine(m) && p.write && m.status === 'active' ? (
              <select aria-label="Visibility" value={m.visibility} onChange={(e) => run(() => reloadOnFailure(api('PATCH', `/memories/${m.id}`, { visibility: e.currentTarget.value })))}>
                {VISIBILITIES.filter((v) => p.share || v === 'private' || v === m.visibility).map((v) => (
                  <option value={v}>{v}</option>
                ))}
              </select>
            ) : null}
            {(mine(m) && p.write) || p.delete ? (
              <button type="button" class="link danger" onClick={() => confirm('Delete this memory?') && run(() => api('DELETE', `/memories/${m.id}`))}>
                Delete
              </button>
            ) : null}
          </li>
        ))}
      </ul>
    </section>
  );
}
