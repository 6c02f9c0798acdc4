import { useEffect, useState } from 'preact/hooks';
import { explain } from '../api';
import { ErrorNote, when } from '../components';
import { modeText, personName, sharesApi, type SharedSession } from '../shares-api';

/** Sessions of other people shared with the person or their teams: opened read-only. Shown only when there are some. */
export function SharedWithMe() {
  const [list, setList] = useState<SharedSession[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    sharesApi.sharedWithMe().then(setList, (err) => setError(explain(err)));
  }, []);
  if (!list?.length && !error) return null;
  return (
    <section class="shared-with-me" aria-label="Shared with me">
      <h2>Shared with me</h2>
      <ErrorNote error={error} onClose={() => setError(null)} />
      <ul class="list">
        {(list ?? []).map((s) => (
          <li key={s.sessionId}>
            <a href={`#/sessions/${s.sessionId}`}>{s.title}</a>
            <small>
              {personName(s.owner)} · {modeText(s.mode, s.sharedAt)}
              {s.team ? ` · team ${s.team}` : ''} · {when(s.updatedAt)}
            </small>
          </li>
        ))}
      </ul>
    </section>
  );
}
