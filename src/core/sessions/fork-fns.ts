/**
 * Where a branch of a session is cut, pure. A branch keeps the transcript up to and including
 * the chosen message; when that is an answer, the whole answer to its prompt (an answer of several steps is
 * several assistant messages with the same parent), so a branch never holds half a turn.
 */

interface Message {
  info: { id: string; role: string; parentID?: unknown };
}

/**
 * `before`: the first message the branch leaves out (null: none, the branch keeps them all); `kept`: how
 * many it keeps. Null when `messageId` is not one of `messages` (ascending ids, as the runtime lists them).
 */
export function forkCut(messages: readonly Message[], messageId: string): { before: string | null; kept: number } | null {
  let i = messages.findIndex((m) => m.info.id === messageId);
  if (i < 0) return null;
  const chosen = messages[i].info;
  if (chosen.role === 'assistant') {
    while (i + 1 < messages.length && messages[i + 1].info.role === 'assistant' && messages[i + 1].info.parentID === chosen.parentID) i++;
  }
  return { before: messages[i + 1]?.info.id ?? null, kept: i + 1 };
}

/** A branch's title: the session's, marked (within the title limit of 200 characters). */
export const branchTitle = (title: string) => `${title.slice(0, 190)} (branch)`;

/**
 * What a branch says of the workspace: a person has one workspace that all their sessions share, so a
 * branch cannot have files of its own as of the message it was cut at.
 */
export const SHARED_WORKSPACE_NOTE =
  'The branch shares your workspace with your other sessions: your files are as they are now, not as of that message. The turns it copied keep their changes: Undo on one of them in the branch puts the files back as they were before it (Redo brings them back).';
