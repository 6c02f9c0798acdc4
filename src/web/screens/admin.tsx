import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { adminTabs } from '../admin-tabs';
import { api, explain } from '../api';
import { changer, ErrorNote, usd, when } from '../components';
import type { Me } from '../types';
import { EgressTab } from './admin-egress';
import { GatewayControls, NewGateway } from './admin-gateways';
import { GitHostsTab } from './admin-git-hosts';
import { McpServersTab } from './admin-mcp-servers';
import { LimitsTab } from './admin-limits';
import { RolesTab } from './admin-roles';
import { TemplatesTab } from './admin-templates';
import { EmbedderTab } from './setup-embedder';
import { ProvidersTab } from './setup-providers';

interface User {
  id: string;
  handle: string;
  email: string;
  displayName: string;
  roles: string[];
}
interface Role {
  id: string;
  name: string;
  description: string;
}
interface AuditEntry {
  id: string;
  ts: string;
  actor: string;
  action: string;
  target: string;
  channel: string;
  sessionId: string | null;
  userId: string | null;
}
interface Gateway {
  id: string;
  kind: string;
  botUsername: string;
  botId: string;
  webhookUrl?: string;
  enabled: boolean;
}
interface Code {
  code: string;
  externalUserName: string;
  externalUserId: string;
  expiresAt: string;
}

/** The admin screens a user's permissions open: users and roles, the audit log, usage, gateways. */
export function AdminScreen(props: { me: Me; tab: string }) {
  const a = props.me.permissions.admin;
  const tabs = adminTabs(props.me.permissions);
  const asked = props.tab === 'runtime' ? 'providers' : props.tab; // the tab's earlier address
  const tab = tabs.some(([id]) => id === asked) ? asked : tabs[0]?.[0];
  return (
    <section class="admin">
      <h1>Admin</h1>
      <nav class="tabs" aria-label="Admin">
        {tabs.map(([id, label]) => (
          <a href={`#/admin/${id}`} aria-current={id === tab ? 'page' : undefined}>
            {label}
          </a>
        ))}
      </nav>
      {!tab ? <p class="empty">Your roles open no admin screen.</p> : null}
      {tab === 'users' ? <UsersTab canRoles={a.manage_roles} /> : null}
      {tab === 'audit' ? <AuditTab /> : null}
      {tab === 'usage' ? <UsageTab canUsers={a.manage_users} /> : null}
      {tab === 'teams' ? <TeamsTab /> : null}
      {tab === 'providers' ? <ProvidersTab /> : null}
      {tab === 'embedder' ? <EmbedderTab /> : null}
      {tab === 'gateways' ? <GatewaysTab /> : null}
      {tab === 'git' ? <GitHostsTab /> : null}
      {tab === 'mcp' ? <McpServersTab /> : null}
      {tab === 'templates' ? <TemplatesTab /> : null}
      {tab === 'roles' ? <RolesTab held={props.me.permissions} /> : null}
      {tab === 'limits' ? <LimitsTab /> : null}
      {tab === 'egress' ? <EgressTab /> : null}
    </section>
  );
}

function UsersTab(props: { canRoles: boolean }) {
  const [users, setUsers] = useState<User[] | null>(null);
  const [roles, setRoles] = useState<Role[]>([]);
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    api<{ users: User[] }>('GET', '/admin/users').then(
      (r) => setUsers(r.users),
      (err) => setError(explain(err)),
    );
  useEffect(() => {
    void load();
    if (props.canRoles) void api<{ roles: Role[] }>('GET', '/admin/roles').then((r) => setRoles(r.roles), (err) => setError(explain(err)));
  }, []);
  const assign = async (u: User, roleId: string) => {
    try {
      await api('POST', `/admin/users/${u.id}/roles`, { roleId });
      await load();
    } catch (err) {
      setError(explain(err));
    }
  };
  const revoke = async (u: User, name: string) => {
    const role = roles.find((r) => r.name === name);
    if (!role || !confirm(`Take the role ${name} from ${u.displayName || u.handle}?`)) return;
    try {
      await api('DELETE', `/admin/users/${u.id}/roles/${role.id}`);
      await load();
    } catch (err) {
      setError(explain(err));
    }
  };
  return (
    <div>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {users === null ? <p class="boot">Loading…</p> : null}
      <table>
        <thead>
          <tr>
            <th>User</th>
            <th>Email</th>
            <th>Roles</th>
            {roles.length ? <th>Assign</th> : null}
          </tr>
        </thead>
        <tbody>
          {users?.map((u) => (
            <tr key={u.id} data-testid={`user-${u.handle}`}>
              <td>{u.displayName || u.handle}</td>
              <td>{u.email}</td>
              <td>
                {u.roles.map((r) => (
                  <span class="chip">
                    {r}
                    {roles.length ? (
                      <button type="button" class="link" aria-label={`Revoke ${r}`} onClick={() => revoke(u, r)}>
                        ×
                      </button>
                    ) : null}
                  </span>
                ))}
              </td>
              {roles.length ? (
                <td>
                  <select
                    aria-label={`Assign a role to ${u.handle}`}
                    onChange={(e) => {
                      const v = e.currentTarget.value;
                      e.currentTarget.value = '';
                      if (v) void assign(u, v);
                    }}
                  >
                    <option value="">Add role…</option>
                    {roles
                      .filter((r) => !u.roles.includes(r.name))
                      .map((r) => (
                        <option value={r.id}>{r.name}</option>
                      ))}
                  </select>
                </td>
              ) : null}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

const csvCell = (v: unknown) => {
  const s = v === null || v === undefined ? '' : String(v);
  // A leading = + - @ would run as a formula in a spreadsheet: quote it as text.
  const safe = /^[=+\-@\t\r]/.test(s) ? `'${s}` : s;
  return /[",\n\r']/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
};

function AuditTab() {
  const [entries, setEntries] = useState<AuditEntry[] | null>(null);
  const [filters, setFilters] = useState({ action: '', userId: '', since: '', until: '' });
  const [error, setError] = useState<string | null>(null);
  const load = async (e?: Event) => {
    e?.preventDefault();
    const q = new URLSearchParams({ limit: '500' });
    if (filters.action) q.set('action', filters.action);
    if (filters.userId) q.set('userId', filters.userId);
    if (filters.since) q.set('since', new Date(filters.since).toISOString());
    if (filters.until) q.set('until', new Date(filters.until).toISOString());
    try {
      setEntries((await api<{ entries: AuditEntry[] }>('GET', `/admin/audit-log?${q}`)).entries);
      setError(null);
    } catch (err) {
      setError(explain(err));
    }
  };
  useEffect(() => {
    void load();
  }, []);
  const exportCsv = () => {
    const cols = ['ts', 'actor', 'action', 'target', 'channel', 'sessionId', 'userId'] as const;
    const text = [cols.join(','), ...(entries ?? []).map((e) => cols.map((c) => csvCell(e[c])).join(','))].join('\r\n');
    const link = document.createElement('a');
    link.href = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
    link.download = `audit-${new Date().toISOString().slice(0, 19)}.csv`;
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  };
  const set = (name: keyof typeof filters) => (e: { currentTarget: HTMLInputElement }) => setFilters({ ...filters, [name]: e.currentTarget.value });
  return (
    <div>
      <form class="row" onSubmit={load} aria-label="Filter the audit log">
        <label>
          Action <input name="action" value={filters.action} onInput={set('action')} placeholder="e.g. role.assign" />
        </label>
        <label>
          User id <input name="userId" value={filters.userId} onInput={set('userId')} />
        </label>
        <label>
          Since <input type="datetime-local" name="since" value={filters.since} onInput={set('since')} />
        </label>
        <label>
          Until <input type="datetime-local" name="until" value={filters.until} onInput={set('until')} />
        </label>
        <button type="submit">Filter</button>
        <button type="button" onClick={exportCsv} disabled={!entries?.length}>
          Export CSV
        </button>
      </form>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {entries?.length === 0 ? <p class="empty">No entries match.</p> : null}
      {entries?.length ? (
        <table>
          <thead>
            <tr>
              <th>When</th>
              <th>Who</th>
              <th>Action</th>
              <th>Target</th>
              <th>Channel</th>
            </tr>
          </thead>
          <tbody>
            {entries.map((e) => (
              <tr key={e.id} data-testid="audit-entry">
                <td>{when(e.ts)}</td>
                <td>{e.actor}</td>
                <td>{e.action}</td>
                <td>{e.target}</td>
                <td>{e.channel}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </div>
  );
}

interface Usage {
  totalTokens: number;
  totalCostUsd: number;
  byModel: Record<string, { tokens: number; cost: number }>;
  byUser: Record<string, { tokens: number; cost: number }>;
}

interface UsageSeries {
  bucket: 'hour' | 'day';
  window: { from: string; to: string };
  points: Array<{ at: string; model: string; userId: string | null; tokens: number; cost: number }>;
}

const COLOURS = ['#1f5fbf', '#e07b00', '#1a7f37', '#8250df', '#b42318', '#0a7ea4', '#6e7781'];

/** Spending over the window as stacked columns per hour or day, one colour per model. */
function UsageChart(props: { series: UsageSeries }) {
  const { bucket, window, points } = props.series;
  const step = bucket === 'hour' ? 3_600_000 : 86_400_000;
  const first = Math.floor(new Date(window.from).getTime() / step) * step;
  const last = Math.floor(new Date(window.to).getTime() / step) * step;
  const slots = Math.max(1, Math.round((last - first) / step) + 1);
  const models = [...new Set(points.map((p) => p.model))].sort();
  const columns = Array.from({ length: slots }, () => new Map<string, number>());
  for (const p of points) {
    const i = Math.round((new Date(p.at).getTime() - first) / step);
    if (i >= 0 && i < slots) columns[i].set(p.model, (columns[i].get(p.model) ?? 0) + p.tokens);
  }
  const max = Math.max(1, ...columns.map((c) => [...c.values()].reduce((n, v) => n + v, 0)));
  const W = 720;
  const H = 160;
  const w = W / slots;
  return (
    <figure class="chart">
      <figcaption>Tokens per {bucket}, by model</figcaption>
      <svg viewBox={`0 0 ${W} ${H + 18}`} role="img" aria-label={`Tokens per ${bucket} by model`}>
        {columns.map((c, i) => {
          let y = H;
          return models.map((m, k) => {
            const v = c.get(m) ?? 0;
            if (!v) return null;
            const h = (v / max) * H;
            y -= h;
            return (
              <rect x={i * w + 1} y={y} width={Math.max(1, w - 2)} height={h} fill={COLOURS[k % COLOURS.length]}>
                <title>{`${new Date(first + i * step).toLocaleString()}: ${m} ${v.toLocaleString()} tokens`}</title>
              </rect>
            );
          });
        })}
        <line x1="0" y1={H} x2={W} y2={H} stroke="#d9dee4" />
        <text x="0" y={H + 14} font-size="11" fill="#5b6470">
          {new Date(first).toLocaleString()}
        </text>
        <text x={W} y={H + 14} font-size="11" fill="#5b6470" text-anchor="end">
          {new Date(last).toLocaleString()}
        </text>
      </svg>
      <div class="legend">
        {models.map((m, k) => (
          <span>
            <svg width="10" height="10" aria-hidden="true">
              <rect width="10" height="10" fill={COLOURS[k % COLOURS.length]} />
            </svg>{' '}
            {m}
          </span>
        ))}
      </div>
    </figure>
  );
}

function UsageTab(props: { canUsers: boolean }) {
  const [since, setSince] = useState('7d');
  const [usage, setUsage] = useState<Usage | null>(null);
  const [series, setSeries] = useState<UsageSeries | null>(null);
  const [names, setNames] = useState<Record<string, string>>({});
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    api<Usage>('GET', `/admin/usage?since=${since}`).then(setUsage, (err) => setError(explain(err)));
    api<UsageSeries>('GET', `/admin/usage/series?since=${since}`).then(setSeries, (err) => setError(explain(err)));
  }, [since]);
  useEffect(() => {
    if (props.canUsers) void api<{ users: User[] }>('GET', '/admin/users').then((r) => setNames(Object.fromEntries(r.users.map((u) => [u.id, u.displayName || u.handle]))), () => {});
  }, []);
  const bars = (title: string, rows: Record<string, { tokens: number; cost: number }>, label = (k: string) => k) => {
    const list = Object.entries(rows).sort((x, y) => y[1].cost - x[1].cost || y[1].tokens - x[1].tokens);
    const max = Math.max(...list.map(([, v]) => v.tokens), 1);
    return (
      <figure class="bars">
        <figcaption>{title}</figcaption>
        {list.length === 0 ? <p class="empty">Nothing spent in this window.</p> : null}
        {list.map(([k, v]) => (
          <div class="bar" key={k}>
            <span class="label">{label(k)}</span>
            <span class="fill" style={{ width: `${Math.max(1, (v.tokens / max) * 100)}%` }} />
            <span class="value">
              {v.tokens.toLocaleString()} tokens · {usd(v.cost)}
            </span>
          </div>
        ))}
      </figure>
    );
  };
  return (
    <div>
      <label>
        Window{' '}
        <select value={since} onChange={(e) => setSince(e.currentTarget.value)}>
          <option value="24h">24 hours</option>
          <option value="7d">7 days</option>
          <option value="30d">30 days</option>
        </select>
      </label>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {usage ? (
        <>
          <p>
            {usage.totalTokens.toLocaleString()} tokens, {usd(usage.totalCostUsd)}
          </p>
          {series?.points.length ? <UsageChart series={series} /> : null}
          {bars('By model', usage.byModel)}
          {bars('By user', usage.byUser, (id) => names[id] ?? id)}
        </>
      ) : null}
    </div>
  );
}

function GatewaysTab() {
  const [gateways, setGateways] = useState<Gateway[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () => api<{ gateways: Gateway[] }>('GET', '/gateways').then((r) => setGateways(r.gateways), (err) => setError(explain(err)));
  useEffect(() => {
    void load();
  }, []);
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
function GatewayCodes(props: { g: Gateway; onError: (e: string) => void; children?: ComponentChildren }) {
  const { g } = props;
  const [codes, setCodes] = useState<Code[]>([]);
  const load = () => api<{ codes: Code[] }>('GET', `/gateways/${g.id}/pairing-codes`).then((r) => setCodes(r.codes), (err) => props.onError(explain(err)));
  useEffect(() => {
    void load();
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

interface Team {
  id: string;
  name: string;
  members: Array<{ userId: string; handle: string; displayName: string }>;
}

/** Teams decide who sees `team` memories: create, delete, add and remove members. */
function TeamsTab() {
  const [teams, setTeams] = useState<Team[] | null>(null);
  const [users, setUsers] = useState<User[]>([]);
  const [name, setName] = useState('');
  const [error, setError] = useState<string | null>(null);
  const load = () => api<{ teams: Team[] }>('GET', '/admin/teams').then((r) => setTeams(r.teams), (err) => setError(explain(err)));
  useEffect(() => {
    void load();
    void api<{ users: User[] }>('GET', '/admin/users').then((r) => setUsers(r.users), () => {});
  }, []);
  const run = changer(load, setError);
  return (
    <div>
      <ErrorNote error={error} onClose={() => setError(null)} />
      <form
        class="row"
        aria-label="New team"
        onSubmit={(e) => {
          e.preventDefault();
          if (name.trim()) void run(() => api('POST', '/admin/teams', { name: name.trim() }).then(() => setName('')));
        }}
      >
        <label>
          Team name <input value={name} maxLength={100} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <button type="submit" class="primary">
          Create team
        </button>
      </form>
      {teams?.length === 0 ? <p class="empty">No teams yet. Team memories are seen by people who share a team.</p> : null}
      {teams?.map((t) => (
        <div class="gateway" key={t.id}>
          <h2>
            {t.name}{' '}
            <button type="button" class="link danger" onClick={() => confirm(`Delete the team ${t.name}?`) && run(() => api('DELETE', `/admin/teams/${t.id}`))}>
              Delete
            </button>
          </h2>
          {t.members.map((m) => (
            <span class="chip">
              {m.displayName || m.handle}
              <button type="button" class="link" aria-label={`Remove ${m.handle}`} onClick={() => run(() => api('DELETE', `/admin/teams/${t.id}/members/${m.userId}`))}>
                ×
              </button>
            </span>
          ))}
          <select
            aria-label={`Add a member to ${t.name}`}
            onChange={(e) => {
              const v = e.currentTarget.value;
              e.currentTarget.value = '';
              if (v) void run(() => api('POST', `/admin/teams/${t.id}/members`, { userId: v }));
            }}
          >
            <option value="">Add member…</option>
            {users
              .filter((u) => !t.members.some((m) => m.userId === u.id))
              .map((u) => (
                <option value={u.id}>{u.displayName || u.handle}</option>
              ))}
          </select>
        </div>
      ))}
    </div>
  );
}
