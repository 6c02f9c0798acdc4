/**
 * A session exported as a document: its transcript (messages, tool calls) and what its
 * turns changed in the workspace, as Markdown for people and as JSON for programs. Pure: the service
 * (session-manage.ts) gathers the parts, these render them. Everything in a transcript may be the
 * agent's (and so an attacker's) words: Markdown fences are made longer than any run of backticks in
 * what they hold, so no text can close one early and pass for the export's own structure.
 */

type TranscriptMessage = { info: Record<string, any>; parts: Array<Record<string, any>> };

export interface ExportSession {
  sessionId: string;
  title: string;
  templateSlug: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** What the session's turns changed (session-changes.ts ChangeSet, the parts an export keeps). */
export interface ExportChanges {
  files: Array<{ path: string; status: string; from?: string; additions: number; deletions: number; binary: boolean; diff: string; truncated: boolean }>;
  totals: { files: number; additions: number; deletions: number };
  turns: Array<{ messageId: string; files: number; additions: number; deletions: number; paths: string[]; reverted: boolean }>;
  /** false: not known (snapshots off, or not taken for these turns). */
  recorded: boolean;
  snapshots: boolean;
}

export interface ExportDocument {
  format: 'agentws.session-export';
  version: 1;
  exportedAt: string;
  session: { sessionId: string; title: string; templateSlug: string | null; createdAt: string; updatedAt: string };
  messages: TranscriptMessage[];
  /** null: the changes could not be read (the service keeps no snapshots, or asking failed); `changesNote` says why. */
  changes: ExportChanges | null;
  changesNote?: string;
}

/** Tool output kept per call in the Markdown export at most (the JSON keeps what the transcript has). */
export const MARKDOWN_TOOL_OUTPUT_MAX = 4000;

export function exportJson(s: ExportSession, messages: TranscriptMessage[], changes: ExportChanges | null, exportedAt: Date, changesNote?: string): ExportDocument {
  return {
    format: 'agentws.session-export',
    version: 1,
    exportedAt: exportedAt.toISOString(),
    session: { sessionId: s.sessionId, title: s.title, templateSlug: s.templateSlug, createdAt: s.createdAt.toISOString(), updatedAt: s.updatedAt.toISOString() },
    messages,
    changes,
    ...(changesNote ? { changesNote } : {}),
  };
}

/** A fenced block that nothing inside can close: one backtick more than its longest run of them. */
export function fence(body: string, lang = ''): string {
  const longest = Math.max(0, ...[...body.matchAll(/`+/g)].map((m) => m[0].length));
  const bar = '`'.repeat(Math.max(3, longest + 1));
  return `${bar}${lang}\n${body.endsWith('\n') ? body : `${body}\n`}${bar}`;
}

/** Text on one line of Markdown: line breaks made spaces, markup characters of a heading or table escaped. */
export function inline(s: string): string {
  return s.replace(/[\r\n]+/g, ' ').replace(/([\\`*_[\]<>#|])/g, '\\$1').trim();
}

const when = (ms: unknown) => (typeof ms === 'number' && Number.isFinite(ms) ? new Date(ms).toISOString().replace('T', ' ').slice(0, 16) + ' UTC' : null);

function cut(s: string, max: number): string {
  return s.length > max ? `${s.slice(0, max)}\n… (${s.length - max} more characters in the JSON export)` : s;
}

function toolMarkdown(p: Record<string, any>): string {
  const st = (p.state ?? {}) as Record<string, any>;
  const title = typeof st.title === 'string' && st.title ? ` — ${inline(st.title)}` : '';
  const lines = [`**Tool \`${inline(String(p.tool ?? 'tool'))}\`** (${inline(String(st.status ?? 'unknown'))})${title}`, ''];
  if (st.input !== undefined) lines.push('Input:', '', fence(JSON.stringify(st.input, null, 2), 'json'), '');
  if (typeof st.output === 'string' && st.output) lines.push('Output:', '', fence(cut(st.output, MARKDOWN_TOOL_OUTPUT_MAX)), '');
  if (st.error !== undefined && st.error !== null) lines.push('Error:', '', fence(cut(typeof st.error === 'string' ? st.error : JSON.stringify(st.error), MARKDOWN_TOOL_OUTPUT_MAX)), '');
  return lines.join('\n');
}

function errorOf(info: Record<string, any>): string | null {
  const e = info.error as { name?: string; data?: { message?: string } } | undefined;
  if (!e) return null;
  return `${e.name ?? 'Error'}: ${e.data?.message ?? 'the turn failed'}`;
}

/** The session as Markdown: title, details, each message (who, when, text, tool calls), then the changes. */
export function exportMarkdown(s: ExportSession, messages: TranscriptMessage[], changes: ExportChanges | null, exportedAt: Date, changesNote?: string): string {
  const out: string[] = [`# ${inline(s.title) || 'Untitled session'}`, ''];
  out.push(`- Session: \`${s.sessionId}\``);
  if (s.templateSlug) out.push(`- Template: ${inline(s.templateSlug)}`);
  out.push(`- Created: ${when(s.createdAt.getTime())}`, `- Last activity: ${when(s.updatedAt.getTime())}`, `- Exported: ${when(exportedAt.getTime())}`, '');
  out.push('## Conversation', '');
  if (!messages.length) out.push('_No messages yet._', '');
  for (const m of messages) {
    const role = m.info.role === 'user' ? 'You' : 'Agent';
    const at = when(m.info.time?.created);
    out.push(`### ${role}${at ? ` · ${at}` : ''}`, '', `<a id="${String(m.info.id).replace(/[^A-Za-z0-9_-]/g, '')}"></a>`, '');
    for (const p of m.parts ?? []) {
      if (p.type === 'text' && typeof p.text === 'string' && p.text.trim() && !p.synthetic) out.push(p.text.trim(), '');
      else if (p.type === 'tool') out.push(toolMarkdown(p));
      else if (p.type === 'file') out.push(`_Attached file: ${inline(String(p.filename ?? p.url?.slice?.(0, 40) ?? 'file'))}_`, '');
    }
    const err = errorOf(m.info);
    if (err) out.push(`> **${inline(err.split(':')[0])}:** ${inline(err.slice(err.indexOf(':') + 1))}`, '');
  }
  out.push('## Changes in the workspace', '');
  if (!changes) out.push(`_${inline(changesNote ?? 'Not available.')}_`, '');
  else if (!changes.snapshots) out.push('_This service keeps no snapshots of workspaces, so the changes of its turns are not known._', '');
  else if (!changes.files.length) out.push(changes.recorded ? '_No files changed._' : '_Not recorded for these turns._', '');
  else {
    const t = changes.totals;
    out.push(`${t.files} file${t.files === 1 ? '' : 's'} changed, +${t.additions} −${t.deletions}.`, '');
    out.push('| File | Change | + | − |', '|---|---|---:|---:|');
    for (const f of changes.files) out.push(`| ${inline(f.from ? `${f.from} → ${f.path}` : f.path)} | ${inline(f.status)} | ${f.additions} | ${f.deletions} |`);
    out.push('');
    for (const f of changes.files) {
      if (f.binary || !f.diff) continue;
      out.push(`#### ${inline(f.path)}${f.truncated ? ' (diff cut)' : ''}`, '', fence(f.diff, 'diff'), '');
    }
  }
  return `${out.join('\n').trimEnd()}\n`;
}

/** A file name for the download: the title's letters and digits, then the date; never a path. */
export function exportFilename(title: string, at: Date, ext: 'md' | 'json'): string {
  const base = title.normalize('NFKD').replace(/[^\w\s-]/g, '').trim().replace(/[\s_]+/g, '-').replace(/-+/g, '-').toLowerCase().slice(0, 60).replace(/^-|-$/g, '') || 'session';
  return `${base}-${at.toISOString().slice(0, 10)}.${ext}`;
}
