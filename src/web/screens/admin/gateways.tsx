import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, explain } from '../../api';
import { useLoad } from '../../use-load';
import { ErrorNote, when } from '../../components';
import { FieldError, useRefusal } from './fields';
import type { GatewayInfo, PairingCode as Code } from '../../wire';
export type { GatewayInfo };

/**
 * A new chat gateway (POST /v1/gateways). The bot token goes to the API once and is stored sealed: it
 * is never shown again, here or anywhere (a new one replaces it with Rotate token).
 */
function NewGateway(props: { onCreated: () => Promise<unknown> }) {
  const [open, setOpen] = useState(false);
  const [form, setForm] = useState({ kind: 'bot_chat', botUsername: '', botId: '', botToken: '' });
  const refusal = useRefusal(['kind', 'botUsername', 'botId', 'botToken']);
  if (!open) {
    return (
      <button type="button" class="primary" onClick={() => setOpen(true)}>
        New gateway
      </button>
    );
  }
  const set = (name: keyof typeof form) => (e: { currentTarget: HTMLInputElement | HTMLSelectElement }) => setForm({ ...form, [name]: e.currentTarget.value });
  const create = async (e: Event) => {
    e.preventDefault();
    const body = { ...form, botUsername: form.botUsername.trim().replace(/^@/, ''), botId: form.botId.trim() };
    if (await refusal.run(() => api('POST', '/gateways', body))) {
      setForm({ kind: 'bot_chat', botUsername: '', botId: '', botToken: '' });
      setOpen(false);
      await props.onCreated();
    }
  };
  return (
    <form class="setup-form" aria-label="New gateway" onSubmit={create}>
      <div class="row">
        <label>
          Platform
          <select name="kind" value={form.kind} onChange={set('kind')}>
            <option value="bot_chat">bot_chat</option>
            <option value="team_chat">team_chat</option>
          </select>
        </label>
        <label>
          Bot user name
          <input name="botUsername" value={form.botUsername} required maxLength={200} onInput={set('botUsername')} placeholder="acme_bot" />
          <FieldError message={refusal.at('botUsername')} />
        </label>
        <label>
          Bot id
          <input name="botId" value={form.botId} required maxLength={200} onInput={set('botId')} />
          <FieldError message={refusal.at('botId')} />
        </label>
        <label>
          Bot token
          <input name="botToken" type="password" autocomplete="off" value={form.botToken} required onInput={set('botToken')} />
          <FieldError message={refusal.at('botToken')} />
        </label>
      </div>
      <ErrorNote error={refusal.general} onClose={refusal.clear} />
      <div class="row">
        <button type="submit" class="primary">
          Create gateway
        </button>
        <button type="button" onClick={() => setOpen(false)}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** A gateway's settings: enable or disable, rotate its bot token, register its webhook, delete it. */
function GatewayControls(props: { g: GatewayInfo; onChanged: () => Promise<unknown> }) {
  const { g } = props;
  const [token, setToken] = useState('');
  const [rotated, setRotated] = useState(false);
  const [url, setUrl] = useState(g.webhookUrl || `${location.origin}/v1/gateways/${g.id}/webhook`);
  const refusal = useRefusal(['botToken', 'webhookUrl']);
  const change = async (fn: () => Promise<unknown>) => {
    const ok = await refusal.run(fn);
    if (ok) await props.onChanged();
    return ok;
  };
  return (
    <div class="gateway-controls">
      <p class="hint">
        Bot id {g.botId}; webhook {g.webhookUrl ? <code>{g.webhookUrl}</code> : 'not registered'}
        {g.updatedAt ? `; changed ${when(g.updatedAt)}` : ''}
      </p>
      <div class="row">
        <button type="button" onClick={() => change(() => api('PATCH', `/gateways/${g.id}`, { enabled: !g.enabled }))}>
          {g.enabled ? 'Disable' : 'Enable'}
        </button>
        <form
          class="row"
          aria-label={`Rotate the token of ${g.botUsername}`}
          onSubmit={(e) => {
            e.preventDefault();
            setRotated(false);
            void change(() => api('PATCH', `/gateways/${g.id}`, { botToken: token })).then((ok) => {
              if (!ok) return;
              setToken('');
              setRotated(true);
            });
          }}
        >
          <label>
            New bot token
            <input name="botToken" type="password" autocomplete="off" value={token} required onInput={(e) => setToken(e.currentTarget.value)} />
            <FieldError message={refusal.at('botToken')} />
          </label>
          <button type="submit">Rotate token</button>
          {rotated ? <small class="hint">Token replaced; it is stored sealed and not shown again.</small> : null}
        </form>
        <form
          class="row"
          aria-label={`Register the webhook of ${g.botUsername}`}
          onSubmit={(e) => {
            e.preventDefault();
            void change(() => api('POST', `/gateways/${g.id}/webhook/register`, { webhookUrl: url.trim() }));
          }}
        >
          <label>
            Webhook URL (https, public)
            <input name="webhookUrl" class="wide" value={url} required onInput={(e) => setUrl(e.currentTarget.value)} />
            <FieldError message={refusal.at('webhookUrl')} />
          </label>
          <button type="submit">Register webhook</button>
        </form>
        <button type="button" class="danger" onClick={() => confirm(`Delete the gateway @${g.botUsername} with its paired users?`) && change(() => api('DELETE', `/gateways/${g.id}`))}>
          Delete
        </button>
      </div>
      <ErrorNote error={refusal.general} onClose={refusal.clear} />
    </div>
  );
}

/** The tenant's chat gateways, each with its controls and its pending pairing codes. */
export function GatewaysTab() {
  const { data: gateways, error, setError, reload: load } = useLoad(() => api<{ gateways: GatewayInfo[] }>('GET', '/gateways').then((r) => r.gateways));
  return (
    <div>
      <ErrorNote error={error} onClose={() => setError(null)} />
      <NewGateway onCreated={load} />
      {gateways?.length === 0 ? <p class="empty">No gateways yet: chat users reach agents through one.</p> : null}
      {gateways?.map((g) => (
        <GatewayCodes key={g.id} g={g} onError={setError}>
          <GatewayControls g={g} onChanged={load} />
        </GatewayCodes>
      ))}
    </div>
  );
}

/** A gateway's pending pairing codes, live: its event stream says when to look again. */
function GatewayCodes(props: { g: GatewayInfo; onError: (e: string) => void; children?: ComponentChildren }) {
  const { g } = props;
  const [codes, setCodes] = useState<Code[]>([]);
  const load = () => api<{ codes: Code[] }>('GET', `/gateways/${g.id}/pairing-codes`).then((r) => setCodes(r.codes), (err) => props.onError(explain(err)));
  useEffect(() => {
    const source = new EventSource(`/v1/gateways/${g.id}/events`, { withCredentials: true });
    const again = () => void load();
    source.addEventListener('pairing.code_created', again);
    source.addEventListener('pairing.code_approved', again);
    source.onopen = again;
    return () => source.close();
  }, [g.id]);
  const act = async (c: Code, approve: boolean) => {
    try {
      await api(approve ? 'POST' : 'DELETE', `/gateways/${g.id}/pairing-codes/${encodeURIComponent(c.code)}${approve ? '/approve' : ''}`);
      setCodes((list) => list.filter((x) => x.code !== c.code));
    } catch (err) {
      props.onError(explain(err));
      void load();
    }
  };
  return (
    <div class="gateway">
      <h2>
        {g.botUsername} <small>{g.kind}</small> {g.enabled ? null : <span class="badge failed">disabled</span>}
      </h2>
      {props.children}
      {codes.length === 0 ? <p class="empty">No pending pairing codes.</p> : null}
      <ul class="list" aria-label={`Pending codes of ${g.botUsername}`}>
        {codes.map((c) => (
          <li key={c.code} data-testid="pairing-code">
            <code>{c.code}</code> {c.externalUserName || c.externalUserId} <small>until {when(c.expiresAt)}</small>
            <button type="button" class="primary" onClick={() => act(c, true)}>
              Approve
            </button>
            <button type="button" class="danger" onClick={() => act(c, false)}>
              Deny
            </button>
          </li>
        ))}
      </ul>
    </div>
  );
}
