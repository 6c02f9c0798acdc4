import { useEffect, useState } from 'preact/hooks';
import { api } from '../../api';
import { FieldError, FormError, Table, useRefusal, when } from '../../components';
import type { AuditEntry } from '../../wire';

type Person = NonNullable<AuditEntry['actorPerson']>;
/** A person as the log shows them: name and email; anything else (system:cli, gateway:…) as written. */
const who = (ref: string, p?: Person | null) => (p ? `${p.name} <${p.email}>` : ref);
const csvCell = (v: unknown) => {
  const s = v === null || v === undefined ? '' : String(v);
  // A leading = + - @ would run as a formula in a spreadsheet: quote it as text.
  const safe = /^[=+\-@\t\r]/.test(s) ? `'${s}` : s;
  return /[",\n\r']/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
};

/** The tenant's audit log: filtered by action, user and time, exported as CSV. */
export function AuditTab() {
  const [entries, setEntries] = useState<AuditEntry[] | null>(null);
  const [filters, setFilters] = useState({ action: '', user: '', since: '', until: '' });
  const refusal = useRefusal(['action', 'user', 'since', 'until', 'limit']);
  const load = async (e?: Event) => {
    e?.preventDefault();
    const q = new URLSearchParams({ limit: '500' });
    if (filters.action) q.set('action', filters.action);
    if (filters.user.trim()) q.set('user', filters.user.trim());
    if (filters.since) q.set('since', new Date(filters.since).toISOString());
    if (filters.until) q.set('until', new Date(filters.until).toISOString());
    await refusal.run(async () => setEntries((await api<{ entries: AuditEntry[] }>('GET', `/admin/audit-log?${q}`)).entries));
  };
  useEffect(() => {
    void load();
  }, []);
  const exportCsv = () => {
    const cols = ['ts', 'actor', 'actorName', 'actorEmail', 'action', 'target', 'targetName', 'targetEmail', 'channel', 'sessionId', 'userId'] as const;
    const cell = (e: AuditEntry, c: (typeof cols)[number]) =>
      c === 'actorName' ? e.actorPerson?.name : c === 'actorEmail' ? e.actorPerson?.email : c === 'targetName' ? e.targetPerson?.name : c === 'targetEmail' ? e.targetPerson?.email : e[c];
    const text = [cols.join(','), ...(entries ?? []).map((e) => cols.map((c) => csvCell(cell(e, c))).join(','))].join('\r\n');
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
          Action <input name="action" value={filters.action} onInput={set('action')} placeholder="e.g. role.assign" aria-invalid={refusal.at('action') ? true : undefined} />
          <FieldError message={refusal.at('action')} />
        </label>
        <label>
          Person <input name="user" value={filters.user} onInput={set('user')} placeholder="name, email or handle" aria-invalid={refusal.at('user') ? true : undefined} />
          <FieldError message={refusal.at('user')} />
        </label>
        <label>
          Since <input type="datetime-local" name="since" value={filters.since} onInput={set('since')} aria-invalid={refusal.at('since') ? true : undefined} />
          <FieldError message={refusal.at('since')} />
        </label>
        <label>
          Until <input type="datetime-local" name="until" value={filters.until} onInput={set('until')} aria-invalid={refusal.at('until') ? true : undefined} />
          <FieldError message={refusal.at('until')} />
        </label>
        <button type="submit">Filter</button>
        <button type="button" onClick={exportCsv} disabled={!entries?.length}>
          Export CSV
        </button>
        <FormError message={refusal.general} />
      </form>
      {entries?.length === 0 ? <p class="empty">No entries match.</p> : null}
      {entries?.length ? (
        <Table
          items={entries}
          id={(e) => e.id}
          testId={() => 'audit-entry'}
          columns={[
            { title: 'When', cell: (e) => when(e.ts) },
            { title: 'Who', cell: (e) => who(e.actor, e.actorPerson), hint: (e) => e.actor },
            { title: 'Action', cell: (e) => e.action },
            { title: 'Target', cell: (e) => who(e.target, e.targetPerson), hint: (e) => e.target },
            { title: 'Channel', cell: (e) => e.channel },
          ]}
        />
      ) : null}
    </div>
  );
}
