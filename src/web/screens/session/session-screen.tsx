import { useEffect, useState } from 'preact/hooks';
import { explain } from '../../api';
import { ErrorNote } from '../../components';
import { sharesApi, type SessionAccess } from '../../shares-api';
import type { Me } from '../../types';
import { ChatScreen } from './chat';

/**
 * One session: the caller's own (the chat with everything), or somebody else's shared with them (the chat
 * read-only). What they may do is asked first, and again when it changes (a hand-over).
 */
export function SessionScreen(props: { me: Me; sessionId: string }) {
  const [access, setAccess] = useState<SessionAccess | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    sharesApi.access(props.sessionId).then(setAccess, (err) => {
      setError(explain(err));
      setAccess(null);
    });
  useEffect(() => void load(), [props.sessionId]);
  if (error && !access) return <ErrorNote error={error} />;
  if (!access) return <p class="boot">Loading…</p>;
  return <ChatScreen me={props.me} sessionId={props.sessionId} access={access} onAccessChanged={load} key={`${access.role}:${access.mode}`} />;
}
