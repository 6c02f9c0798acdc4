import { useEffect, useState } from 'preact/hooks';
import { api, explain } from '../api';
import { ErrorNote } from '../components';
import { FieldError, useRefusal } from './admin-fields';

interface McpAccess {
  role: string;
  tools: '*' | string[];
}

interface McpServerInfo {
  name: string;
  url: string;
  authKind: 'none' | 'bearer' | 'header';
  authHeader: string | null;
  hasSecret: boolean;
  access: McpAccess[];
  enabled: boolean;
  gatewayPath: string;
}

/** One line per role: `member` (every tool) or `member: search, get_issue`. */
const accessLines = (access: McpAccess[]) => access.map((a) => (a.tools === '*' ? a.role : `${a.role}: ${a.tools.join(', ')}`)).join('\n');
const parseAccess = (text: string): McpAccess[] =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      const at = l.indexOf(':');
      if (at < 0) return { role: l, tools: '*' as const };
      const list = l.slice(at + 1).trim();
      return { role: l.slice(0, at).trim(), tools: list === '*' ? ('*' as const) : list.split(/[\s,]+/).filter(Boolean) };
    });

const EMPTY = { name: '', url: '', authKind: 'bearer' as McpServerInfo['authKind'], authHeader: '', secret: '', access: '' };

/**
 * MCP servers (admin.manage_providers): the tenant's remote MCP servers its agents reach through the
 * gateway host, which adds the server's token (stored sealed, never shown again, never in a sandbox), and
 * which roles may use which of their tools. A change reaches idle agents at once, busy ones at their next turn.
 */
export function McpServersTab() {
  const [servers, setServers] = useState<McpServerInfo[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  /** The form: a new server (editing null) or changes to the named one. */
  const [form, setForm] = useState<typeof EMPTY | null>(null);
  const [editing, setEditing] = useState<string | null>(null);
  const refusal = useRefusal(['name', 'url', 'authKind', 'authHeader', 'secret', 'access']);
  const load = () => api<{ servers: McpServerInfo[] }>('GET', '/admin/connectors/mcp').then((r) => setServers(r.servers), (err) => setError(explain(err)));
  useEffect(() => void load(), []);
  if (!servers) return <ErrorNote error={error} />;

  const set = (name: keyof typeof EMPTY) => (e: { currentTarget: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement }) => setForm({ ...form!, [name]: e.currentTarget.value });
  const edit = (s: McpServerInfo) => {
    setEditing(s.name);
    setForm({ name: s.name, url: s.url, authKind: s.authKind, authHeader: s.authHeader ?? '', secret: '', access: accessLines(s.access) });
    refusal.clear();
  };
  const save = async (e: Event) => {
    e.preventDefault();
    const f = form!;
    const credential = {
      authKind: f.authKind,
      ...(f.authKind === 'header' ? { authHeader: f.authHeader.trim() } : {}),
      // Blank while editing: the stored token stays (it is never shown); switching to none drops it.
      ...(f.secret ? { secret: f.secret } : editing && f.authKind === 'none' ? { secret: null } : {}),
    };
    const body = { url: f.url.trim(), ...credential, access: parseAccess(f.access) };
    const ok = await refusal.run(() => (editing ? api('PATCH', `/admin/connectors/mcp/${encodeURIComponent(editing)}`, body) : api('POST', '/admin/connectors/mcp', { name: f.name.trim(), ...body })));
    if (ok) {
      setForm(null);
      setEditing(null);
      await load();
    }
  };
  const toggle = async (s: McpServerInfo) => {
    try {
      await api('PATCH', `/admin/connectors/mcp/${encodeURIComponent(s.name)}`, { enabled: !s.enabled });
      await load();
    } catch (err) {
      setError(explain(err));
    }
  };
  const remove = async (s: McpServerInfo) => {
    if (!confirm(`Remove the MCP server ${s.name} and its token?`)) return;
    try {
      await api('DELETE', `/admin/connectors/mcp/${encodeURIComponent(s.name)}`);
      await load();
    } catch (err) {
      setError(explain(err));
    }
  };

  return (
    <section aria-label="MCP servers">
      <ErrorNote error={error} onClose={() => setError(null)} />
      <p class="hint">
        Remote MCP servers (Streamable HTTP) the agents may use. Agents reach them through the service, which adds the token: the token never enters a sandbox. An agent sees a server only when one of
        its person's roles is listed, and only the tools listed for that role; its tools appear as <code>&lt;server&gt;_&lt;tool&gt;</code>.
      </p>
      {servers.length ? (
        <table>
          <thead>
            <tr>
              <th>Name</th>
              <th>URL</th>
              <th>Credential</th>
              <th>Roles and tools</th>
              <th>Enabled</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {servers.map((s) => (
              <tr key={s.name}>
                <td>{s.name}</td>
                <td>
                  <code>{s.url}</code>
                </td>
                <td>{s.hasSecret ? (s.authKind === 'header' ? `header ${s.authHeader}` : s.authKind) : 'none'}</td>
                <td>{s.access.length ? s.access.map((a) => `${a.role}: ${a.tools === '*' ? 'all tools' : a.tools.join(', ') || 'no tools'}`).join('; ') : 'no role'}</td>
                <td>{s.enabled ? 'yes' : 'no'}</td>
                <td>
                  <button type="button" onClick={() => edit(s)}>
                    Edit
                  </button>{' '}
                  <button type="button" onClick={() => toggle(s)}>
                    {s.enabled ? 'Disable' : 'Enable'}
                  </button>{' '}
                  <button type="button" class="danger" onClick={() => remove(s)}>
                    Remove
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p class="empty">No MCP servers yet.</p>
      )}
      {!form ? (
        <button type="button" class="primary" onClick={() => (setEditing(null), setForm({ ...EMPTY }), refusal.clear())}>
          New MCP server
        </button>
      ) : (
        <form class="setup-form" aria-label={editing ? `Edit MCP server ${editing}` : 'New MCP server'} onSubmit={save}>
          <div class="row">
            <label>
              Name
              <input name="name" value={form.name} required disabled={Boolean(editing)} maxLength={40} pattern="[a-z][a-z0-9-]{0,39}" onInput={set('name')} placeholder="tracker" aria-describedby="mcp-name-error" />
              <FieldError id="mcp-name-error" message={refusal.at('name')} />
            </label>
            <label class="grow">
              URL
              <input name="url" value={form.url} required maxLength={2000} onInput={set('url')} placeholder="https://mcp.example.com/mcp" aria-describedby="mcp-url-error" />
              <FieldError id="mcp-url-error" message={refusal.at('url')} />
            </label>
          </div>
          <div class="row">
            <label>
              Credential
              <select name="authKind" value={form.authKind} onChange={set('authKind')}>
                <option value="bearer">Bearer token</option>
                <option value="header">Header</option>
                <option value="none">None</option>
              </select>
            </label>
            {form.authKind === 'header' ? (
              <label>
                Header
                <input name="authHeader" value={form.authHeader} required maxLength={100} onInput={set('authHeader')} placeholder="x-api-key" aria-describedby="mcp-header-error" />
                <FieldError id="mcp-header-error" message={refusal.at('authHeader')} />
              </label>
            ) : null}
            {form.authKind !== 'none' ? (
              <label class="grow">
                {editing ? 'New token (blank: keep the stored one)' : 'Token'}
                <input name="secret" type="password" autocomplete="off" value={form.secret} required={!editing} maxLength={8192} onInput={set('secret')} aria-describedby="mcp-secret-error" />
                <FieldError id="mcp-secret-error" message={refusal.at('secret')} />
              </label>
            ) : null}
          </div>
          <label>
            Roles that may use it, one a line: <code>member</code> for every tool, <code>member: search, get_issue</code> for those tools
            <textarea name="access" rows={4} value={form.access} onInput={set('access')} placeholder={'member: search\nadmin'} aria-describedby="mcp-access-error" />
            <FieldError id="mcp-access-error" message={refusal.at('access')} />
          </label>
          <ErrorNote error={refusal.general} onClose={refusal.clear} />
          <div class="row">
            <button type="submit" class="primary">
              {editing ? 'Save changes' : 'Add MCP server'}
            </button>
            <button type="button" onClick={() => (setForm(null), setEditing(null))}>
              Cancel
            </button>
          </div>
        </form>
      )}
    </section>
  );
}
