import { useEffect, useState } from 'preact/hooks';
import { api, explain } from '../api';
import { ErrorNote } from '../components';
import { FieldError, useRefusal } from './admin-fields';

interface McpAccess {
  role: string;
  tools: '*' | string[];
  resources: '*' | string[];
  prompts: '*' | string[];
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

type Kind = 'tools' | 'resources' | 'prompts';

/**
 * One line per role with any of this kind: `member` (every one) or `member: search, get_issue` (those).
 * Tools list every role (a role with none still has the server); resources and prompts only the roles given some.
 */
const accessLines = (access: McpAccess[], kind: Kind) =>
  access
    .filter((a) => kind === 'tools' || a[kind] === '*' || a[kind].length)
    .map((a) => (a[kind] === '*' ? a.role : `${a.role}: ${(a[kind] as string[]).join(', ')}`))
    .join('\n');
const parseLines = (text: string) =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      const at = l.indexOf(':');
      // A resource URI has a colon of its own: the role is what comes before the first ": " (or a bare role).
      const sep = l.indexOf(': ');
      const cut = sep >= 0 ? sep : at >= 0 && !l.slice(at + 1).startsWith('/') ? at : -1;
      if (cut < 0) return { role: l, list: '*' as const };
      const list = l.slice(cut + 1).trim();
      return { role: l.slice(0, cut).trim(), list: list === '*' ? ('*' as const) : list.split(/[\s,]+/).filter(Boolean) };
    });
/** The three text areas as one access list: a role named in any of them gets an entry, none of a kind it is not named in. */
const parseAccess = (text: Record<Kind, string>): McpAccess[] => {
  const byRole = new Map<string, McpAccess>();
  for (const kind of ['tools', 'resources', 'prompts'] as const) {
    for (const { role, list } of parseLines(text[kind])) {
      const e = byRole.get(role) ?? { role, tools: [], resources: [], prompts: [] };
      e[kind] = list;
      byRole.set(role, e);
    }
  }
  return [...byRole.values()];
};
const summary = (a: McpAccess) =>
  [
    `${a.role}: ${a.tools === '*' ? 'all tools' : a.tools.join(', ') || 'no tools'}`,
    a.resources === '*' ? 'all resources' : a.resources.length ? `resources ${a.resources.join(', ')}` : '',
    a.prompts === '*' ? 'all prompts' : a.prompts.length ? `prompts ${a.prompts.join(', ')}` : '',
  ]
    .filter(Boolean)
    .join(', ');

const EMPTY = { name: '', url: '', authKind: 'bearer' as McpServerInfo['authKind'], authHeader: '', secret: '', access: '', resources: '', prompts: '' };

/**
 * MCP servers (admin.manage_providers): the tenant's remote MCP servers its agents reach through the
 * gateway host, which adds the server's token (stored sealed, never shown again, never in a sandbox), and
 * which roles may use which of their tools, and apart, resources and prompts (none unless listed). A
 * change reaches idle agents at once, busy ones at their next turn.
 */
export function McpServersTab() {
  const [servers, setServers] = useState<McpServerInfo[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  /** The form: a new server (editing null) or changes to the named one. */
  const [form, setForm] = useState<typeof EMPTY | null>(null);
  const [editing, setEditing] = useState<string | null>(null);
  const refusal = useRefusal(['name', 'url', 'authKind', 'authHeader', 'secret', 'access'], { conflictAt: 'name' });
  const load = () => api<{ servers: McpServerInfo[] }>('GET', '/admin/connectors/mcp').then((r) => setServers(r.servers), (err) => setError(explain(err)));
  useEffect(() => void load(), []);
  if (!servers) return <ErrorNote error={error} />;

  const set = (name: keyof typeof EMPTY) => (e: { currentTarget: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement }) => setForm({ ...form!, [name]: e.currentTarget.value });
  const edit = (s: McpServerInfo) => {
    setEditing(s.name);
    setForm({ name: s.name, url: s.url, authKind: s.authKind, authHeader: s.authHeader ?? '', secret: '', access: accessLines(s.access, 'tools'), resources: accessLines(s.access, 'resources'), prompts: accessLines(s.access, 'prompts') });
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
    const body = { url: f.url.trim(), ...credential, access: parseAccess({ tools: f.access, resources: f.resources, prompts: f.prompts }) };
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
        its person's roles is listed, and only the tools listed for that role; its tools appear as <code>&lt;server&gt;_&lt;tool&gt;</code>. Its resources and prompts are none unless listed below
        for the role.
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
                <td>{s.access.length ? s.access.map(summary).join('; ') : 'no role'}</td>
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
              <input name="name" value={form.name} required disabled={Boolean(editing)} maxLength={40} pattern="[a-z][a-z0-9\-]{0,39}" onInput={set('name')} placeholder="tracker" aria-describedby="mcp-name-error" />
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
          <div class="row">
            <label class="grow">
              Resources they may read (none unless listed): <code>member</code> for all, <code>member: docs://handbook/*, tickets://T-1</code> for those (a prefix ends in *)
              <textarea name="resources" rows={2} value={form.resources} onInput={set('resources')} placeholder="member: docs://handbook/*" />
            </label>
            <label class="grow">
              Prompts they may use (none unless listed): <code>member</code> for all, <code>member: triage</code> for those
              <textarea name="prompts" rows={2} value={form.prompts} onInput={set('prompts')} placeholder="member: triage" />
            </label>
          </div>
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
