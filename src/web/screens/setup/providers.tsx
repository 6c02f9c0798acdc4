import { useState } from 'preact/hooks';
import { api, explain } from '../../api';
import { changer, ErrorNote, FieldError, FormError, SettingText, Table, useRefusal, when } from '../../components';
import { useLoad } from '../../use-load';
import type { Provider, RuntimeStatus, TestResult } from '../../wire';

// The "Models and runtime" admin tab (admin.manage_providers): the tenant's model providers (add, edit,
// rotate or remove the key, enable or disable, test, remove), the default model and apply, and the
// runtime's status. Every change is the API's route (the same permission and audit).

/** A provider's model, and what its calls are charged (the API settles unset cache prices). */
type Model = Provider['models'][number];
type Prices = Provider['prices'][string];
const gb = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GB`;

/** Providers, the default model and the runtimes: what decides whether agents can run. */
export function ProvidersTab() {
  const [notice, setNotice] = useState<string | null>(null);
  // null: no form; '': the new-provider form; a name: that provider's edit form.
  const [editing, setEditing] = useState<string | null>(null);
  const { data: status, error, setError, reload: load } = useLoad(() => api<RuntimeStatus>('GET', '/admin/runtime'));
  const run = changer(load, setError);
  // The default model and Apply: a refusal under the select (or by the button), not at the tab's top.
  const choice = useRefusal(['defaultModel']);
  const choose = (change: () => Promise<unknown>) => choice.run(change).then(() => load());
  if (!status) return <ErrorNote error={error} />;
  const models = status.providers.filter((p) => p.enabled).flatMap((p) => p.models.map((m) => `${p.name}/${m.id}`));
  const apply = () =>
    choose(async () => {
      // prepare: the workspace can prompt now, so the admin's own runtime starts meanwhile (the first
      // answer after set-up does not pay the cold start).
      const r = await api<{ pushed: boolean; runtimeError?: string }>('POST', '/admin/runtime/apply', { prepare: true });
      setNotice(r.pushed ? 'Applied: new prompts run on it.' : `Applied and recorded; running runtimes take it when they next start (${r.runtimeError}).`);
    });
  return (
    <div>
      <ErrorNote error={error} onClose={() => setError(null)} />
      <p data-testid="runtime-readiness">
        <span class={`badge ${status.ready ? 'completed' : 'failed'}`}>{status.ready ? 'ready' : 'not ready'}</span> <SettingText text={status.detail} />
      </p>
      <p>
        Runtimes running: {status.runtime.running} of at most {status.runtime.max}; sandbox {status.runtime.sandbox}
        {status.runtime.warning ? (
          <span class="warn">
            {' '}
            <SettingText text={status.runtime.warning} />
          </span>
        ) : null}
      </p>
      {status.runtime.hosts.map((h) => (
        <p key={`${h.hostname}:${h.pid}`} data-testid="runtime-host">
          Host {h.hostname}: {h.resident} of {h.capacity} runtimes resident ({h.frozen} frozen{h.pagedOut ? `, ${h.pagedOut} of them paged out` : ''}, {h.starting} starting, {h.busy} with a turn), {gb(h.runtimesMemoryBytes)} held by them,{' '}
          {gb(h.memoryAvailableBytes)} of {gb(h.memoryTotalBytes)} available{h.freezer ? '' : '; idle runtimes cannot be frozen there'}
          {h.limits ? (
            <>
              <br />
              <small class="hint" data-testid="runtime-limits">
                Each runtime: {h.limits.memory ? `memory ${h.limits.memoryMaxBytes ? gb(h.limits.memoryMaxBytes) : '?'}` : 'no memory limit'}, {h.limits.processes ? `${h.limits.processesMax} processes` : 'no process limit'},{' '}
                {h.limits.cpu ? 'an equal CPU share' : 'no CPU share'}; workspace quota {h.limits.disk ?? 'off'}
              </small>
              {h.limits.paging ? (
                <>
                  <br />
                  <small class="hint" data-testid="runtime-paging">
                    Idle runtimes are paged out to swap after {Math.round((h.limits.pageOutAfterMs ?? 0) / 1000)} s frozen
                  </small>
                </>
              ) : h.limits.unavailable.paging ? (
                <>
                  <br />
                  <span class="warn" data-testid="runtime-paging">
                    Idle runtimes stay resident there: <SettingText text={h.limits.unavailable.paging} />
                  </span>
                </>
              ) : null}
              {Object.entries(h.limits.unavailable)
                .filter(([k]) => k !== 'disk' && k !== 'paging')
                .map(([k, why]) => (
                  <span class="warn">
                    <br />
                    No {k} limit there: <SettingText text={why} />
                  </span>
                ))}
            </>
          ) : null}
        </p>
      ))}
      <p class="hint">
        Workspace quota: {status.runtime.workspaceQuotaBytes === null ? 'none' : `${gb(status.runtime.workspaceQuotaBytes)} a person`} (measured, not enforced by the kernel: past it a person&apos;s agent
        is stopped and their new turns refused; settings.workspace.quotaMb, or <code>aws tenant quota</code>).
      </p>
      {status.runtime.people.some((p) => p.near.length || p.overQuota) ? (
        <ul aria-label="Near their limits" data-testid="near-limits">
          {status.runtime.people
            .filter((p) => p.near.length || p.overQuota)
            .map((p) => (
              <li key={p.userId}>
                {p.handle}: {p.diskBytes !== null ? `disk ${gb(p.diskBytes)}${p.diskQuotaBytes ? ` of ${gb(p.diskQuotaBytes)}` : ''}` : ''}
                {p.running && p.memoryBytes !== null ? `, memory ${gb(p.memoryBytes)}${p.memoryMaxBytes ? ` of ${gb(p.memoryMaxBytes)}` : ''}` : ''}
                {p.running && p.pids !== null ? `, ${p.pids} of ${p.pidsMax ?? '?'} processes` : ''}
                {p.overQuota ? <span class="warn"> past the quota: new turns refused</span> : <span class="warn"> near: {p.near.join(', ')}</span>}
              </li>
            ))}
        </ul>
      ) : null}

      <h2>Default model</h2>
      <div class="row">
        <label>
          Default model
          <select
            value={status.defaultModel && models.includes(status.defaultModel) ? status.defaultModel : ''}
            disabled={!models.length}
            name="defaultModel"
            aria-invalid={choice.at('defaultModel') ? true : undefined}
            onChange={(e) => e.currentTarget.value && choose(() => api('PATCH', '/admin/runtime', { defaultModel: e.currentTarget.value }))}
          >
            {/* None chosen yet, or its provider removed or disabled since. */}
            {status.defaultModel && models.includes(status.defaultModel) ? null : <option value="">{models.length ? 'Choose…' : 'Add a provider first'}</option>}
            {models.map((m) => (
              <option value={m}>{m}</option>
            ))}
          </select>
          <FieldError message={choice.at('defaultModel')} />
        </label>
        {status.pendingChanges && status.defaultModel ? (
          <button type="button" class="primary" onClick={apply}>
            Apply changes
          </button>
        ) : null}
        <FormError message={choice.general} />
      </div>
      <p class="hint" data-testid="applied">
        {status.applied
          ? `Applied: ${status.applied.defaultModel} with ${status.applied.providers.join(', ') || 'no provider'}${status.applied.at ? `, ${when(status.applied.at)}` : ''}${status.applied.byPerson ? ` by ${status.applied.byPerson.name} (${status.applied.byPerson.email})` : status.applied.by ? ` by ${status.applied.by}` : ''}.`
          : 'Nothing applied yet: prompts wait for a default model to be applied.'}
        {status.pendingChanges && status.applied ? ' Changes since then wait for Apply.' : ''}
      </p>
      {notice ? (
        <p class="notice">
          <SettingText text={notice} />
        </p>
      ) : null}

      <h2>Providers</h2>
      {status.providers.length === 0 ? <p class="empty">No providers yet. Add the model server or API your agents will use.</p> : null}
      {status.providers.length ? (
        <Table
          label="Providers"
          items={status.providers}
          id={(p) => p.name}
          columns={[{ title: 'Provider' }, { title: 'Models' }, { title: 'Key' }, { title: 'Enabled' }, { title: 'Actions' }]}
          row={(p) => <ProviderRow p={p} run={run} onEdit={() => setEditing(p.name)} />}
        />
      ) : null}
      {editing === null ? (
        <button type="button" onClick={() => setEditing('')}>
          Add a provider
        </button>
      ) : (
        <ProviderForm
          key={editing}
          p={status.providers.find((p) => p.name === editing)}
          onDone={() => {
            setEditing(null);
            void load();
          }}
        />
      )}
    </div>
  );
}

/** One provider: its models and key, and what can be done to it. */
function ProviderRow(props: { p: Provider; run: (change: () => Promise<unknown>) => Promise<void>; onEdit: () => void }) {
  const { p, run } = props;
  const [test, setTest] = useState<TestResult | 'running' | null>(null);
  const [rotating, setRotating] = useState(false);
  const [key, setKey] = useState('');
  const keyRefusal = useRefusal(['apiKey']);
  const path = `/admin/providers/${encodeURIComponent(p.name)}`;
  const doTest = async () => {
    setTest('running');
    try {
      setTest(await api<TestResult>('POST', `${path}/test`, {}));
    } catch (err) {
      setTest({ ok: false, provider: p.name, model: '', latencyMs: 0, message: explain(err) });
    }
  };
  return (
    <>
      <tr data-testid={`provider-${p.name}`}>
        <td>
          <strong>{p.name}</strong> <small>{p.kind}</small>
          <br />
          <small>{p.baseUrl ?? 'official API'}</small>
        </td>
        <td>
          {p.models.map((m) => (
            <div>
              {m.id}{' '}
              <small>
                {m.contextLimit ? `${m.contextLimit.toLocaleString()} ctx` : ''}
                {m.outputLimit ? ` · ${m.outputLimit.toLocaleString()} out` : ''}
                {m.inputCostPerMTok !== undefined || m.outputCostPerMTok !== undefined ? ` · $${m.inputCostPerMTok ?? 0}/$${m.outputCostPerMTok ?? 0} per MTok` : ''}
                {cacheText(m, p.prices?.[m.id])}
              </small>
            </div>
          ))}
        </td>
        <td>{p.hasApiKey ? 'stored' : 'none'}</td>
        <td>
          <input type="checkbox" aria-label={`${p.name} enabled`} checked={p.enabled} onChange={(e) => run(() => api('PATCH', path, { enabled: e.currentTarget.checked }))} />
        </td>
        <td>
          <button type="button" onClick={doTest} disabled={test === 'running'}>
            Test
          </button>
          <button type="button" class="link" onClick={props.onEdit}>
            Edit
          </button>
          <button type="button" class="link" onClick={() => setRotating(!rotating)}>
            {p.hasApiKey ? 'Rotate key' : 'Set key'}
          </button>
          {p.hasApiKey && p.kind === 'openai-compatible' ? (
            <button type="button" class="link danger" onClick={() => confirm(`Remove the stored key of ${p.name}?`) && run(() => api('PATCH', path, { apiKey: null }))}>
              Remove key
            </button>
          ) : null}
          <button type="button" class="link danger" onClick={() => confirm(`Remove the provider ${p.name}? Prompts on its models stop at the next apply.`) && run(() => api('DELETE', path))}>
            Remove
          </button>
        </td>
      </tr>
      {rotating ? (
        <tr>
          <td colSpan={5}>
            <form
              class="row"
              aria-label={`New key for ${p.name}`}
              onSubmit={(e) => {
                e.preventDefault();
                if (!key) return keyRefusal.say('Paste the new key.', 'apiKey');
                void keyRefusal.run(() => api('PATCH', path, { apiKey: key })).then((ok) => {
                  if (!ok) return;
                  setKey('');
                  setRotating(false);
                  void run(async () => {}); // reloads the tab: the key is now stored
                });
              }}
            >
              <label>
                New API key for {p.name}
                <input name="apiKey" type="password" autoComplete="off" value={key} aria-invalid={keyRefusal.at('apiKey') ? true : undefined} onInput={(e) => setKey(e.currentTarget.value)} />
                <FieldError message={keyRefusal.at('apiKey')} />
              </label>
              <button type="submit" class="primary">
                Save key
              </button>
              <FormError message={keyRefusal.general} />
            </form>
          </td>
        </tr>
      ) : null}
      {test && test !== 'running' ? (
        <tr>
          <td colSpan={5} data-testid={`provider-test-${p.name}`} class={test.ok ? '' : 'error'}>
            {test.ok
              ? `Test passed: ${test.model} answered in ${test.latencyMs} ms${test.reply ? ` ("${test.reply}")` : ''}.`
              : `Test failed${test.model ? ` (${test.model})` : ''}: ${test.status ? `${test.status} ` : test.status === null ? 'unreachable: ' : ''}${test.message}`}
          </td>
        </tr>
      ) : null}
    </>
  );
}

/**
 * A model's prompt-cache prices as charged, when it has prices at all: what the tenant set, or the default
 * the API settled (marked, so a default is never mistaken for a choice).
 */
function cacheText(m: Model, charged?: Prices): string {
  if (!charged || [m.inputCostPerMTok, m.cacheReadCostPerMTok, m.cacheWriteCostPerMTok].every((x) => x === undefined)) return '';
  const set = m.cacheReadCostPerMTok !== undefined && m.cacheWriteCostPerMTok !== undefined;
  return ` · cache $${charged.cacheReadPerMTok} read/$${charged.cacheWritePerMTok} write${set ? '' : ' (defaults where unset)'}`;
}

/** A model's row as typed: numbers stay text until the form is sent (its display name is kept as it was). */
interface ModelDraft {
  id: string;
  name?: string;
  contextLimit: string;
  outputLimit: string;
  inputCostPerMTok: string;
  outputCostPerMTok: string;
  cacheReadCostPerMTok: string;
  cacheWriteCostPerMTok: string;
}
const draftOf = (m?: Model): ModelDraft => ({
  id: m?.id ?? '',
  name: m?.name,
  contextLimit: m?.contextLimit?.toString() ?? '',
  outputLimit: m?.outputLimit?.toString() ?? '',
  inputCostPerMTok: m?.inputCostPerMTok?.toString() ?? '',
  outputCostPerMTok: m?.outputCostPerMTok?.toString() ?? '',
  cacheReadCostPerMTok: m?.cacheReadCostPerMTok?.toString() ?? '',
  cacheWriteCostPerMTok: m?.cacheWriteCostPerMTok?.toString() ?? '',
});
type DraftField = Exclude<keyof ModelDraft, 'name'>;
const MODEL_FIELDS: Array<[DraftField, string]> = [
  ['id', 'Model id'],
  ['contextLimit', 'Context tokens'],
  ['outputLimit', 'Output tokens'],
  ['inputCostPerMTok', 'Input $/MTok'],
  ['outputCostPerMTok', 'Output $/MTok'],
  ['cacheReadCostPerMTok', 'Cache read $/MTok'],
  ['cacheWriteCostPerMTok', 'Cache write $/MTok'],
];
/** What an empty cache price field means, by the provider's kind (the API's rule, shown before it is sent). */
const cacheDefault = (kind: Provider['kind'], field: DraftField): string | undefined => {
  if (field === 'cacheReadCostPerMTok') return kind === 'anthropic' ? '0.1× input' : 'input price';
  if (field === 'cacheWriteCostPerMTok') return kind === 'anthropic' ? '1.25× input' : 'input price';
  return undefined;
};

/** Adds a provider (no `p`) or changes one: base URL, key, models. */
function ProviderForm(props: { p?: Provider; onDone: () => void }) {
  const { p } = props;
  const [name, setName] = useState(p?.name ?? '');
  const [kind, setKind] = useState<Provider['kind']>(p?.kind ?? 'openai-compatible');
  const [baseUrl, setBaseUrl] = useState(p?.baseUrl ?? '');
  const [apiKey, setApiKey] = useState('');
  const [models, setModels] = useState<ModelDraft[]>(p ? p.models.map(draftOf) : [draftOf()]);
  const setModel = (i: number, field: DraftField, value: string) => setModels(models.map((m, k) => (k === i ? { ...m, [field]: value } : m)));
  // Rows without an id are not sent: the API's models.<n> is the n-th row that has one.
  const sentRows = models.map((m, i) => (m.id.trim() ? i : -1)).filter((i) => i >= 0);
  const sentIndex = (row: number) => sentRows.indexOf(row);
  const refusal = useRefusal(['name', 'kind', 'baseUrl', 'apiKey', ...sentRows.flatMap((_, n) => MODEL_FIELDS.map(([f]) => `models.${n}.${f}`))]);
  const submit = (e: Event) => {
    e.preventDefault();
    // A number as typed: "" is unset; anything else is sent as given, so the API names what is wrong with it.
    const num = (s: string) => (s.trim() === '' ? undefined : Number.isFinite(Number(s)) ? Number(s) : s.trim());
    const list = models
      .filter((m) => m.id.trim())
      .map((m) => ({
        id: m.id.trim(),
        ...(m.name !== undefined ? { name: m.name } : {}),
        contextLimit: num(m.contextLimit),
        outputLimit: num(m.outputLimit),
        inputCostPerMTok: num(m.inputCostPerMTok),
        outputCostPerMTok: num(m.outputCostPerMTok),
        cacheReadCostPerMTok: num(m.cacheReadCostPerMTok),
        cacheWriteCostPerMTok: num(m.cacheWriteCostPerMTok),
      }));
    const body = { baseUrl: baseUrl.trim() || undefined, models: list, ...(apiKey ? { apiKey } : {}) };
    void refusal
      .run(async () => {
        if (p) await api('PATCH', `/admin/providers/${encodeURIComponent(p.name)}`, body);
        else await api('POST', '/admin/providers', { name: name.trim(), kind, ...body });
      })
      .then((ok) => ok && props.onDone());
  };
  return (
    <form class="gateway" aria-label={p ? `Edit ${p.name}` : 'New provider'} onSubmit={submit}>
      <h2>{p ? `Edit ${p.name}` : 'New provider'}</h2>
      <div class="row">
        <label>
          Name
          <input value={name} disabled={Boolean(p)} required pattern="[a-z0-9][a-z0-9\-]{0,39}" title="lower-case letters, digits and dashes" aria-invalid={refusal.at('name') ? true : undefined} onInput={(e) => setName(e.currentTarget.value)} />
          <FieldError message={refusal.at('name')} />
        </label>
        <label>
          Kind
          <select value={kind} disabled={Boolean(p)} onChange={(e) => setKind(e.currentTarget.value as Provider['kind'])}>
            <option value="openai-compatible">OpenAI-compatible</option>
            <option value="openai">OpenAI</option>
            <option value="anthropic">Anthropic</option>
          </select>
        </label>
        <label class="grow">
          Base URL
          <input value={baseUrl} placeholder={kind === 'openai-compatible' ? 'http://llm.internal:8000/v1' : 'the official API'} aria-invalid={refusal.at('baseUrl') ? true : undefined} onInput={(e) => setBaseUrl(e.currentTarget.value)} />
          <FieldError message={refusal.at('baseUrl')} />
        </label>
        <label>
          {p?.hasApiKey ? 'New API key (blank: keep)' : 'API key'}
          <input type="password" autoComplete="off" value={apiKey} aria-invalid={refusal.at('apiKey') ? true : undefined} onInput={(e) => setApiKey(e.currentTarget.value)} />
          <FieldError message={refusal.at('apiKey')} />
        </label>
      </div>
      {models.map((m, i) => (
        <div class="row" aria-label={`Model ${i + 1}`} role="group">
          {MODEL_FIELDS.map(([field, label]) => {
            const said = sentIndex(i) >= 0 ? refusal.at(`models.${sentIndex(i)}.${field}`) : null;
            return (
            <label>
              {label}
              <input
                aria-invalid={said ? true : undefined}
                aria-label={`${label} ${i + 1}`}
                value={m[field]}
                placeholder={cacheDefault(kind, field)}
                required={field === 'id' && i === 0}
                inputMode={field === 'id' ? undefined : 'decimal'}
                size={field === 'id' ? 18 : 7}
                onInput={(e) => setModel(i, field, e.currentTarget.value)}
              />
              <FieldError message={said} />
            </label>
            );
          })}
          {models.length > 1 ? (
            <button type="button" class="link danger" aria-label={`Remove model ${i + 1}`} onClick={() => setModels(models.filter((_, k) => k !== i))}>
              ×
            </button>
          ) : null}
        </div>
      ))}
      <FormError message={refusal.general} />
      <div class="row">
        <button type="button" onClick={() => setModels([...models, draftOf()])}>
          Add a model
        </button>
        <button type="submit" class="primary">
          {p ? 'Save provider' : 'Add provider'}
        </button>
        <button type="button" class="link" onClick={props.onDone}>
          Cancel
        </button>
      </div>
    </form>
  );
}
