import { useEffect, useState } from 'preact/hooks';
import { api, explain } from '../../api';
import { ErrorNote, FieldError, FormError, SettingText, usePersonNames, useRefusal, when } from '../../components';
import { useLoad } from '../../use-load';
import type { Embedder, Job as AnyJob, Provider } from '../../wire';

/** A backfill job: its result is the embed-memories job's progress (the job schema leaves each kind's result open). */
type Job = Omit<AnyJob, 'result'> & { result: { total?: number; embedded?: number; remaining?: number; superseded?: boolean } | null };

// The "Embedder" admin tab (admin.manage_providers): the model memories are embedded with (set, clear),
// and the backfill that embeds the memories lacking a vector of it, followed to its end. The same routes
// as `aws embedder set|clear` and `aws memory backfill`.


const KIND = 'embed-memories';
const running = (j: Job | null) => j?.status === 'queued' || j?.status === 'running';

export function EmbedderTab(props: { canUsers?: boolean }) {
  const [form, setForm] = useState({ provider: '', model: '', dimensions: '' });
  const [job, setJob] = useState<Job | null>(null);
  const [busy, setBusy] = useState(false);
  const loaded = useLoad(() =>
    api<{ embedder: Embedder | null; memories?: { embedded: number; pending: number } }>('GET', '/admin/embedder').then((r) => {
      // The form starts from the embedder in use (a change is then one field away).
      if (r.embedder) setForm((f) => (f.model ? f : { provider: r.embedder!.provider, model: r.embedder!.model, dimensions: '' }));
      return r;
    }),
  );
  const { data: state, reload: load } = loaded;
  const usable = useLoad(() =>
    api<{ providers: Provider[] }>('GET', '/admin/providers').then((r) => {
      const list = r.providers.filter((p) => p.enabled && p.kind !== 'anthropic');
      setForm((f) => ({ ...f, provider: f.provider || list[0]?.name || '' }));
      return list;
    }),
  );
  const providers = usable.data ?? [];
  const error = loaded.error ?? usable.error;
  const setError = (e: string | null) => {
    loaded.setError(e);
    usable.setError(e);
  };
  useEffect(() => {
    // A backfill started earlier (here, by the CLI, or with a change of model) is followed too.
    void api<{ jobs: Job[] }>('GET', `/jobs?kind=${KIND}&limit=1`).then((r) => setJob(r.jobs[0] ?? null), () => {});
  }, []);
  // While the job runs its row is read twice a second (its result counts the memories embedded so far).
  useEffect(() => {
    if (!job || !running(job)) return;
    const timer = setTimeout(() => {
      api<{ job: Job }>('GET', `/jobs/${job.id}`).then(
        (r) => {
          setJob(r.job);
          if (!running(r.job)) void load();
        },
        (err) => setError(explain(err)),
      );
    }, 500);
    return () => clearTimeout(timer);
  }, [job]);

  const act = async (change: () => Promise<unknown>) => {
    setBusy(true);
    setError(null);
    try {
      await change();
      await load();
    } catch (err) {
      setError(explain(err));
    } finally {
      setBusy(false);
    }
  };
  const refusal = useRefusal(['provider', 'model', 'dimensions']);
  const personName = usePersonNames(props.canUsers !== false);
  const set = (e: Event) => {
    e.preventDefault();
    setBusy(true);
    // The dimensions as typed, a number when it reads as one: the API names what is wrong with it.
    const dims = form.dimensions.trim();
    void refusal
      .run(async () => {
        const r = await api<{ backfill: Job | null }>('PUT', '/admin/embedder', { provider: form.provider, model: form.model.trim(), ...(dims ? { dimensions: Number.isFinite(Number(dims)) ? Number(dims) : dims } : {}) });
        if (r.backfill) setJob(r.backfill);
        await load();
      })
      .finally(() => setBusy(false));
  };
  const backfill = () => act(async () => setJob((await api<{ job: Job }>('POST', '/jobs', { kind: KIND, payload: { limit: Math.max(1, state?.memories?.pending ?? 500) } })).job));
  const clear = () => confirm('Clear the embedder? Stored vectors stay; memory search answers on full text until one is set again.') && act(() => api('DELETE', '/admin/embedder'));

  const field = (name: keyof typeof form) => (e: { currentTarget: HTMLInputElement | HTMLSelectElement }) => setForm({ ...form, [name]: e.currentTarget.value });
  const r = job?.result ?? {};
  const e = state?.embedder;
  return (
    <div>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {state === null ? <p class="boot">Loading…</p> : null}
      {state && !e ? <p class="empty">No embedder: memory search answers on full text. Set one to search memories by meaning too.</p> : null}
      {e ? (
        <p data-testid="embedder">
          Embedder: <strong>{e.provider}</strong> / {e.model}, {e.dimensions} dimensions <small>(set by {personName(e.updatedBy)}, {when(e.updatedAt)})</small>
          <br />
          {state?.memories ? `${state.memories.embedded} memories embedded, ${state.memories.pending} waiting for a vector of this model.` : null}{' '}
          <button type="button" class="link danger" onClick={clear} disabled={busy}>
            Clear embedder
          </button>
        </p>
      ) : null}

      <form class="row" aria-label="Set the embedder" onSubmit={set}>
        <label>
          Provider
          <select name="provider" value={form.provider} onChange={field('provider')} required aria-invalid={refusal.at('provider') ? true : undefined}>
            {providers.length ? null : <option value="">No OpenAI or OpenAI-compatible provider</option>}
            {providers.map((p) => (
              <option value={p.name}>{p.name}</option>
            ))}
          </select>
          <FieldError message={refusal.at('provider')} />
        </label>
        <label>
          Embeddings model
          <input name="model" value={form.model} onInput={field('model')} placeholder="text-embedding-3-small" required maxLength={200} aria-invalid={refusal.at('model') ? true : undefined} />
          <FieldError message={refusal.at('model')} />
        </label>
        <label>
          Dimensions (optional)
          <input name="dimensions" value={form.dimensions} onInput={field('dimensions')} inputMode="numeric" size={8} aria-invalid={refusal.at('dimensions') ? true : undefined} />
          <FieldError message={refusal.at('dimensions')} />
        </label>
        <button type="submit" class="primary" disabled={busy || !providers.length}>
          {e ? 'Change embedder' : 'Set embedder'}
        </button>
      </form>
      <FormError message={refusal.general} />
      <p class="hint">Setting it asks the model for one vector first. A change of model re-embeds every memory (a backfill job).</p>

      <h2>Backfill</h2>
      <p>
        <button type="button" onClick={backfill} disabled={busy || !e || running(job)}>
          Embed memories lacking a vector
        </button>
      </p>
      {job ? (
        <div data-testid="backfill">
          <progress max={Math.max(1, r.total ?? 1)} value={r.embedded ?? (job.status === 'completed' ? 1 : 0)} aria-label="Backfill progress" />{' '}
          <span data-testid="backfill-state">
            {job.status === 'queued' ? 'queued (waiting for a worker)' : job.status}: {r.embedded ?? 0} of {r.total ?? '?'} embedded
            {job.status === 'completed' ? `, ${r.remaining ?? 0} still lacking a vector${r.superseded ? ' (the embedder changed: its own backfill takes over)' : ''}` : ''}
          </span>
          {job.error ? (
            <p class="error">
              <SettingText text={job.error} />
            </p>
          ) : null}
          <small> started {when(job.createdAt)}</small>
        </div>
      ) : null}
    </div>
  );
}
