import { useEffect, useState } from 'preact/hooks';
import { api, explain } from '../api';
import { ErrorNote, when } from '../components';

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
const csvCell = (v: unknown) => {
  const s = v === null || v === undefined ? '' : String(v);
  // A leading = + - @ would run as a formula in a spreadsheet: quote it as text.
  const safe = /^[=+\-@\t\r]/.test(s) ? `'${s}` : s;
  return /[",\n\r']/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
};

/** The tenant's audit log: filtered by action, user and time, exported as CSV. */
export function AuditTab() {
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
