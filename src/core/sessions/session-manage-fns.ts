import { ValidationError } from '../../kernel/errors.js';

/**
 * Pure rules of managing and searching sessions (session-manage.ts): the list's paging key, the search
 * index's rows taken from a transcript, and the snippet's highlights. Unit-tested beside.
 */

export const LIST_LIMIT_DEFAULT = 100;
export const LIST_LIMIT_MAX = 500;
export const SEARCH_LIMIT_DEFAULT = 20;
export const SEARCH_LIMIT_MAX = 50;
/** Text of one message kept in the index at most: its beginning (a whole log pasted as a prompt is not worth more). */
export const INDEX_MAX_CHARS = 100_000;

export type ListState = 'active' | 'archived' | 'all';

/** Where a page of the list ends: the sort key of its last session (pinned first, then most recently updated). */
export interface ListCursor {
  pinned: boolean;
  /** updated_at as the database printed it (microseconds kept: a JS Date would drop them and skip rows). */
  updatedAt: string;
  id: string;
}

export function encodeCursor(c: ListCursor): string {
  return Buffer.from(JSON.stringify([c.pinned ? 1 : 0, c.updatedAt, c.id])).toString('base64url');
}

/** The cursor a previous page handed out; a 400 naming `cursor` for anything else. */
export function decodeCursor(s: string): ListCursor {
  const bad = () => new ValidationError('cursor: not a cursor this list handed out (use nextCursor of the previous page)', { details: { field: 'cursor' } });
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(s, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (!Array.isArray(v) || v.length !== 3) throw bad();
  const [p, at, id] = v;
  if ((p !== 0 && p !== 1) || typeof at !== 'string' || !/^\d{4}-\d\d-\d\d[ T][\d:.]+([+-]\d\d(:?\d\d)?|Z)?$/.test(at) || typeof id !== 'string' || !/^[0-9a-f-]{36}$/i.test(id)) throw bad();
  return { pinned: p === 1, updatedAt: at, id };
}

/** A limit from the query string: whole, 1..max, else 400 naming `limit`. */
export function parseLimit(limit: number | undefined, dflt: number, max: number): number {
  if (limit === undefined) return dflt;
  if (!Number.isInteger(limit) || limit < 1 || limit > max) throw new ValidationError(`limit: must be a whole number from 1 to ${max}`, { details: { field: 'limit' } });
  return limit;
}

type TranscriptMessage = { info: Record<string, any>; parts: Array<Record<string, any>> };

/** One row of the search index: a message's text as a person reads it. */
export interface IndexRow {
  messageId: string;
  role: 'user' | 'assistant';
  body: string;
}

/** The characters the snippet's highlight marks are made of: removed from indexed text, so text cannot fake one. */
const MARK_START = '\u0002';
const MARK_END = '\u0003';
export const HEADLINE_OPTIONS = `StartSel=${MARK_START},StopSel=${MARK_END},MaxWords=30,MinWords=12,ShortWord=2,MaxFragments=2,FragmentDelimiter=" … "`;

/**
 * The rows a transcript gives the index: per message, its text parts the person reads (not synthetic
 * ones the runtime injected, not reasoning, not tool input or output: tool output is the agent's and
 * the files', and by default not what a person searches for), joined; messages with no such text give
 * none. Only finished answers (an answer still streaming is indexed when its turn ends).
 */
export function indexRows(messages: TranscriptMessage[]): IndexRow[] {
  const out: IndexRow[] = [];
  for (const m of messages) {
    const role = m.info?.role;
    if (role !== 'user' && role !== 'assistant') continue;
    if (typeof m.info.id !== 'string' || !m.info.id) continue;
    if (role === 'assistant' && !m.info.time?.completed && !m.info.error) continue;
    const text = (m.parts ?? [])
      .filter((p) => p.type === 'text' && !p.synthetic && typeof p.text === 'string')
      .map((p) => p.text as string)
      .join('\n')
      .replaceAll(MARK_START, '')
      .replaceAll(MARK_END, '')
      // NUL is refused by PostgreSQL text.
      .replaceAll('\u0000', '')
      .trim();
    if (!text) continue;
    out.push({ messageId: m.info.id, role, body: text.slice(0, INDEX_MAX_CHARS) });
  }
  return out;
}

/**
 * ts_headline's output (marks around matched words) as plain text with runs of white space made one
 * space, and the ranges of it to highlight: the client renders text, never markup the agent wrote.
 */
export function snippetOf(headline: string): { snippet: string; highlights: Array<[number, number]> } {
  let snippet = '';
  const highlights: Array<[number, number]> = [];
  let start = -1;
  for (const ch of headline) {
    if (ch === MARK_START) start = snippet.length;
    else if (ch === MARK_END) {
      if (start >= 0 && snippet.length > start) highlights.push([start, snippet.length]);
      start = -1;
    } else if (/\s/.test(ch)) {
      if (snippet && !snippet.endsWith(' ')) snippet += ' ';
    } else snippet += ch;
  }
  const text = snippet.trimEnd();
  return { snippet: text, highlights: highlights.map(([a, b]) => [a, Math.min(b, text.length)] as [number, number]).filter(([a, b]) => b > a) };
}
