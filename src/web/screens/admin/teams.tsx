import { useState } from 'preact/hooks';
import { api } from '../../api';
import { useLoad } from '../../use-load';
import { changer, ErrorNote, FieldError, useRefusal } from '../../components';
import type { User } from './users';
import type { Team } from '../../wire';

/** Teams decide who sees `team` memories: create, delete, add and remove members. */
export function TeamsTab() {
  const [name, setName] = useState('');
  const { data: teams, error, setError, reload: load } = useLoad(() => api<{ teams: Team[] }>('GET', '/admin/teams').then((r) => r.teams));
  // The people to add (a refusal is not shown: the list is then empty).
  const users = useLoad(() => api<{ users: User[] }>('GET', '/admin/users').then((r) => r.users)).data ?? [];
  const run = changer(load, setError);
  // A name already taken is the name's problem: under it too.
  const refusal = useRefusal(['name'], { conflictAt: 'name' });
  return (
    <div>
      <ErrorNote error={error} onClose={() => setError(null)} />
      <form
        class="row"
        aria-label="New team"
        onSubmit={(e) => {
          e.preventDefault();
          if (!name.trim()) return refusal.say('Give the team a name.', 'name');
          void refusal.run(() => api('POST', '/admin/teams', { name: name.trim() }).then(() => setName('')).then(load));
        }}
      >
        <label>
          Team name <input name="name" value={name} maxLength={100} aria-invalid={refusal.at('name') ? true : undefined} onInput={(e) => setName(e.currentTarget.value)} />
          <FieldError message={refusal.at('name') ?? refusal.general} />
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
