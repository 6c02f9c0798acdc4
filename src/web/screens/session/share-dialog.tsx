import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { errorField, explain } from '../../api';
import { ErrorNote } from '../../components';
import { modeText, personName, sharesApi, type HandOverResult, type Person, type Share, type ShareMode } from '../../shares-api';

type Target = { kind: 'person'; ref: string; label: string } | { kind: 'team'; ref: string; label: string };

/** Suggestions for a person or team as the owner types (people from two characters on). */
function useTargets(q: string, teams: boolean) {
  const [found, setFound] = useState<Target[]>([]);
  useEffect(() => {
    const text = q.trim();
    if (!text) return setFound([]);
    let live = true;
    const timer = setTimeout(() => {
      sharesApi.targets(text).then(
        (r) => live && setFound([...r.people.map((p): Target => ({ kind: 'person', ref: p.userId, label: personName(p) })), ...(teams ? r.teams.map((t): Target => ({ kind: 'team', ref: t.teamId, label: `Team ${t.name} (${t.members})` })) : [])]),
        () => live && setFound([]),
      );
    }, 150);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [q]);
  return found;
}

function Overlay(props: { label: string; onClose: () => void; children: ComponentChildren }) {
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') {
        e.preventDefault();
        props.onClose();
      }
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, []);
  return (
    <div class="overlay" onClick={(e) => e.target === e.currentTarget && props.onClose()}>
      <dialog open class="sheet" aria-label={props.label}>
        <div class="sheet-head">
          <h2>{props.label}</h2>
          <button type="button" class="link" onClick={props.onClose} aria-label="Close">
            ×
          </button>
        </div>
        {props.children}
      </dialog>
    </div>
  );
}

/**
 * Shares the session read-only with people or teams of the organisation, live or as of now, and lists
 * and revokes its shares (owner only).
 */
export function ShareDialog(props: { sessionId: string; onClose: () => void }) {
  const [shares, setShares] = useState<Share[] | null>(null);
  const [q, setQ] = useState('');
  const [picked, setPicked] = useState<Target[]>([]);
  const [mode, setMode] = useState<ShareMode>('live');
  const [error, setError] = useState<{ text: string; field?: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const found = useTargets(q, true).filter((t) => !picked.some((p) => p.ref === t.ref));
  const load = () => sharesApi.list(props.sessionId).then(setShares, (err) => setError({ text: explain(err) }));
  useEffect(() => void load(), []);

  const add = (t: Target) => {
    setPicked((list) => [...list, t]);
    setQ('');
  };
  // What was typed (an email or handle) without picking a suggestion: named as a person.
  const typed = (): Target[] => (q.trim() ? [{ kind: 'person', ref: q.trim(), label: q.trim() }] : []);

  const share = async (e: Event) => {
    e.preventDefault();
    const all = [...picked, ...typed()];
    setError(null);
    if (!all.length) return setError({ text: 'Name a person or a team to share with.', field: 'people' });
    setBusy(true);
    try {
      await sharesApi.create(props.sessionId, { people: all.filter((t) => t.kind === 'person').map((t) => t.ref), teams: all.filter((t) => t.kind === 'team').map((t) => t.ref), mode });
      setPicked([]);
      setQ('');
      await load();
    } catch (err) {
      setError({ text: explain(err), field: errorField(err) });
    } finally {
      setBusy(false);
    }
  };

  const revoke = async (s: Share) => {
    try {
      await sharesApi.revoke(props.sessionId, s.shareId);
      await load();
    } catch (err) {
      setError({ text: explain(err) });
    }
  };

  // A refusal naming a person or team (`people/0`, `teams/1`) shows under the field where they are named.
  const whoError = error && /^(people|teams)\b/.test(error.field ?? '') ? error.text : null;
  return (
    <Overlay label="Share this session" onClose={props.onClose}>
      <form class="share-form" onSubmit={share}>
        <label>
          People or teams
          <div class="chips">
            {picked.map((t) => (
              <span class="chip" key={t.ref}>
                {t.label}
                <button type="button" class="link" aria-label={`Remove ${t.label}`} onClick={() => setPicked((list) => list.filter((x) => x.ref !== t.ref))}>
                  ×
                </button>
              </span>
            ))}
          </div>
          <input name="who" value={q} onInput={(e) => setQ(e.currentTarget.value)} placeholder="Name, email or team" autoComplete="off" aria-invalid={whoError ? true : undefined} />
        </label>
        {found.length ? (
          <ul class="suggestions" aria-label="Suggestions">
            {found.map((t) => (
              <li key={t.ref}>
                <button type="button" class="link" onClick={() => add(t)}>
                  {t.label}
                </button>
              </li>
            ))}
          </ul>
        ) : null}
        {whoError ? <p class="field-error" role="alert">{whoError}</p> : null}
        <fieldset class="modes">
          <legend>They see</legend>
          <label>
            <input type="radio" name="mode" checked={mode === 'live'} onChange={() => setMode('live')} /> Live: they follow it as it happens
          </label>
          <label>
            <input type="radio" name="mode" checked={mode === 'as_of_now'} onChange={() => setMode('as_of_now')} /> As of now: what is here now, nothing later
          </label>
        </fieldset>
        <p class="hint">Read-only: they can read the conversation and what changed, never prompt, approve, undo, or open your files or terminal.</p>
        <button type="submit" class="primary" disabled={busy}>
          Share
        </button>
      </form>
      {error && !whoError ? <ErrorNote error={error.text} onClose={() => setError(null)} /> : null}
      <h3>Shared with</h3>
      {shares === null ? <p class="boot">Loading…</p> : null}
      {shares?.length === 0 ? <p class="empty">Nobody yet.</p> : null}
      {shares?.length ? (
        <ul class="list" aria-label="Shared with">
          {shares.map((s) => {
            const who = s.person ? personName(s.person) : `Team ${s.team?.name}`;
            return (
              <li key={s.shareId}>
                <span class="grow">{who}</span>
                <small>{modeText(s.mode, s.createdAt)}</small>
                <button type="button" class="link danger" onClick={() => revoke(s)} aria-label={`Revoke ${who}`}>
                  Revoke
                </button>
              </li>
            );
          })}
        </ul>
      ) : null}
    </Overlay>
  );
}

/** Hands the session to a teammate, who continues it in their own runtime and workspace (owner only). */
export function HandOverDialog(props: { sessionId: string; onClose: () => void; onDone: (r: HandOverResult) => void }) {
  const [q, setQ] = useState('');
  const [to, setTo] = useState<Person | null>(null);
  const [keep, setKeep] = useState(true);
  const [error, setError] = useState<{ text: string; field?: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const found = useTargets(to ? '' : q, false);

  const go = async (e: Event) => {
    e.preventDefault();
    const ref = to?.userId ?? q.trim();
    setError(null);
    if (!ref) return setError({ text: 'Name the teammate to hand the session to.', field: 'to' });
    setBusy(true);
    try {
      props.onDone(await sharesApi.handOver(props.sessionId, { to: ref, keepAccess: keep }));
    } catch (err) {
      setError({ text: explain(err), field: errorField(err) });
    } finally {
      setBusy(false);
    }
  };

  return (
    <Overlay label="Hand over this session" onClose={props.onClose}>
      <form class="share-form" onSubmit={go}>
        <label>
          Teammate
          {to ? (
            <span class="chip">
              {personName(to)}
              <button type="button" class="link" aria-label="Choose another" onClick={() => setTo(null)}>
                ×
              </button>
            </span>
          ) : (
            <input name="to" value={q} onInput={(e) => setQ(e.currentTarget.value)} placeholder="Name or email" autoComplete="off" aria-invalid={error?.field === 'to' ? true : undefined} />
          )}
        </label>
        {!to && found.length ? (
          <ul class="suggestions" aria-label="Suggestions">
            {found.map((t) => (
              <li key={t.ref}>
                <button type="button" class="link" onClick={() => setTo({ userId: t.ref, name: t.label, email: '', handle: '' })}>
                  {t.label}
                </button>
              </li>
            ))}
          </ul>
        ) : null}
        {error?.field === 'to' ? <p class="field-error" role="alert">{error.text}</p> : null}
        <p class="hint">
          They continue it in their own workspace, at their cost from now on: the conversation so far goes with it, and a copy of your workspace's files goes into a new folder <code>handed-over/…</code> of theirs (links and <code>.git</code> are not copied).
        </p>
        <label class="inline">
          <input type="checkbox" checked={keep} onChange={(e) => setKeep(e.currentTarget.checked)} /> Keep read-only access for me
        </label>
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Handing over…' : 'Hand over'}
        </button>
      </form>
      {error && error.field !== 'to' ? <ErrorNote error={error.text} onClose={() => setError(null)} /> : null}
    </Overlay>
  );
}
