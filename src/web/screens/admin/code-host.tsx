import { useState } from 'preact/hooks';
import { explain } from '../../api';
import { HOST_SETUP, getWebhook, listDeliveries, newSecret, outcomeText, testDelivery, updateWebhook, type CodeHostKind, type Delivery, type Webhook } from '../../codehost-api';
import { ErrorNote, FieldError, Table, useRefusal, when } from '../../components';
import { originHref } from '../../sessions-list';
import { useLoad } from '../../use-load';

/** A first guess at the kind from the host's address (the admin can change it before turning webhooks on). */
const guessKind = (baseUrl: string): CodeHostKind => (/github/i.test(baseUrl) ? 'github' : /gitlab/i.test(baseUrl) ? 'gitlab' : 'gitea');
const lines = (text: string) => text.split('\n').map((l) => l.trim()).filter(Boolean);

/**
 * A git host's webhook, under the host's settings: issues and review comments there become
 * agents' pull requests. Turning it on generates the URL and the secret; the secret is shown in this
 * panel once (the API never returns it again), then the mention, label and repositories that trigger a
 * run, the latest deliveries with their outcome, and a signed test delivery.
 */
export function CodeHostPanel(props: { host: { name: string; baseUrl: string } }) {
  const { name } = props.host;
  const [hook, setHook] = useState<Webhook | null>(null);
  const [deliveries, setDeliveries] = useState<Delivery[] | null>(null);
  const [secret, setSecret] = useState<string | null>(null);
  const [copied, setCopied] = useState<'url' | 'secret' | null>(null);
  const [kind, setKind] = useState<CodeHostKind>(guessKind(props.host.baseUrl));
  const [form, setForm] = useState({ mention: '', label: '', repos: '' });
  const [tested, setTested] = useState<string | null>(null);
  const refusal = useRefusal(['mention', 'label', 'repos', 'kind']);

  const show = (w: Webhook) => {
    setHook(w);
    setForm({ mention: w.mention, label: w.label, repos: w.repos.join('\n') });
    if (w.kind) setKind(w.kind);
  };
  const { error, setError } = useLoad(
    () =>
      getWebhook(name).then((w) => {
        show(w);
        if (w.secretSet) void loadDeliveries();
      }),
    [name],
  );
  const loadDeliveries = () => listDeliveries(name).then((r) => setDeliveries(r.deliveries), (err) => setError(explain(err)));
  if (!hook) return error ? <ErrorNote error={error} onClose={() => setError(null)} /> : null;

  const copy = (what: 'url' | 'secret', text: string) =>
    navigator.clipboard.writeText(text).then(() => setCopied(what), () => setError('Could not copy: select the text and copy it yourself.'));
  const generate = async () => {
    if (hook.secretSet && !confirm(`A new secret for ${name}'s webhook? The current one stops working at once: paste the new one at the host.`)) return;
    await refusal.run(async () => {
      const r = await newSecret(name, hook.secretSet ? undefined : kind);
      const { secret: s, ...w } = r;
      show(w);
      setSecret(s);
      setCopied(null);
      await loadDeliveries();
    });
  };
  const save = async (e: Event) => {
    e.preventDefault();
    await refusal.run(async () => show(await updateWebhook(name, { mention: form.mention.trim(), label: form.label.trim(), repos: lines(form.repos), kind })));
  };
  const toggle = async () => {
    await refusal.run(async () => show(await updateWebhook(name, { enabled: !hook.enabled })));
  };
  const test = async () => {
    setTested(null);
    await refusal.run(async () => {
      const r = await testDelivery(name);
      setTested(r.outcome);
      await loadDeliveries();
    });
  };
  const set = (field: keyof typeof form) => (e: { currentTarget: HTMLInputElement | HTMLTextAreaElement }) => setForm({ ...form, [field]: e.currentTarget.value });
  const setup = HOST_SETUP[hook.kind ?? kind];

  return (
    <section class="code-host" aria-label={`Webhook of ${name}`}>
      <h4>Issues to pull requests</h4>
      <ErrorNote error={error} onClose={() => setError(null)} />
      <p class="hint">
        A comment starting with the mention, or the label added, on an issue or pull request of an allowed repository runs an agent of the person who wrote it (their account here must be
        connected to {name}, or their email known) and opens a pull request with its changes.
      </p>
      {!hook.secretSet ? (
        <div class="row">
          <label>
            The host is
            <select name="kind" value={kind} onChange={(e) => setKind(e.currentTarget.value as CodeHostKind)}>
              <option value="github">GitHub</option>
              <option value="gitlab">GitLab</option>
              <option value="gitea">Gitea or Forgejo</option>
            </select>
            <FieldError message={refusal.at('kind')} />
          </label>
          <button type="button" class="primary" onClick={() => void generate()}>
            Turn on webhooks
          </button>
        </div>
      ) : null}
      {secret ? (
        <div class="notice" role="status" data-testid="webhook-secret-box">
          <p>
            The webhook's secret. Paste it at {setup.name} as <strong>{setup.secretField}</strong> now: it will not be shown again.
          </p>
          <code class="secret" data-testid="webhook-secret">
            {secret}
          </code>{' '}
          <button type="button" onClick={() => void copy('secret', secret)}>
            {copied === 'secret' ? 'Copied' : 'Copy secret'}
          </button>{' '}
          <button type="button" onClick={() => setSecret(null)}>
            Done
          </button>
        </div>
      ) : null}
      {hook.webhookUrl ? (
        <>
          <p>
            Payload URL: <code data-testid="webhook-url">{hook.webhookUrl}</code>{' '}
            <button type="button" onClick={() => void copy('url', hook.webhookUrl!)}>
              {copied === 'url' ? 'Copied' : 'Copy URL'}
            </button>
          </p>
          <p class="hint">
            At {setup.name}: add a webhook with this URL and the secret. {setup.contentType}Events: {setup.events}.
          </p>
          <form class="setup-form" aria-label={`Webhook settings of ${name}`} onSubmit={save}>
            <div class="row">
              <label>
                Mention
                <input name="mention" value={form.mention} required maxLength={61} onInput={set('mention')} placeholder="@agent" />
                <FieldError message={refusal.at('mention')} />
              </label>
              <label>
                Label
                <input name="label" value={form.label} required maxLength={50} onInput={set('label')} placeholder="agent" />
                <FieldError message={refusal.at('label')} />
              </label>
              <label>
                Repositories (one pattern a line; none: no repository triggers)
                <textarea name="repos" rows={2} value={form.repos} onInput={set('repos')} placeholder="acme/*" />
                <FieldError message={refusal.at('repos')} />
              </label>
            </div>
            <div class="row">
              <button type="submit" class="primary">
                Save webhook
              </button>
              <button type="button" onClick={() => void toggle()}>
                {hook.enabled ? 'Turn off' : 'Turn on'}
              </button>
              <button type="button" onClick={() => void generate()}>
                New secret
              </button>
              <button type="button" onClick={() => void test()} disabled={!hook.enabled}>
                Send a test delivery
              </button>
              <span data-testid="webhook-state">{hook.enabled ? 'On' : 'Off: deliveries are answered 404'}</span>
              {tested ? <span role="status">Test delivery: {tested}</span> : null}
            </div>
          </form>
        </>
      ) : null}
      <ErrorNote error={refusal.general} onClose={refusal.clear} />
      {deliveries ? <Deliveries host={name} deliveries={deliveries} onRefresh={() => void loadDeliveries()} /> : null}
    </section>
  );
}

/** The latest deliveries: when, what, where (a link to the host's issue, when it is an http(s) one), who, and the outcome. */
function Deliveries(props: { host: string; deliveries: Delivery[]; onRefresh: () => void }) {
  return (
    <div>
      <p>
        Recent deliveries{' '}
        <button type="button" class="link" onClick={props.onRefresh}>
          Refresh
        </button>
      </p>
      {props.deliveries.length ? (
        <Table
          label={`Deliveries to ${props.host}`}
          items={props.deliveries}
          id={(d) => d.id}
          testId={() => 'delivery'}
          columns={[
            { title: 'Received', cell: (d) => when(d.receivedAt) },
            { title: 'Event', cell: (d) => d.event },
            {
              title: 'Issue or pull request',
              cell: (d) => {
                const target = d.repo ? `${d.repo}${d.targetNumber !== null ? `#${d.targetNumber}` : ''}` : '';
                const href = originHref(d.targetUrl);
                return target && href ? (
                  <a href={href} target="_blank" rel="noopener noreferrer">
                    {target}
                  </a>
                ) : (
                  target
                );
              },
            },
            { title: 'By', cell: (d) => (d.actorLogin ? `${d.actorLogin}${d.handle ? ` (${d.handle})` : ''}` : '') },
            {
              title: 'Outcome',
              testId: 'delivery-outcome',
              cell: (d) => (
                <>
                  {outcomeText(d)}
                  {d.replays ? <small> · sent again {d.replays}×</small> : null}
                </>
              ),
            },
          ]}
        />
      ) : (
        <p class="empty">No deliveries yet.</p>
      )}
    </div>
  );
}
