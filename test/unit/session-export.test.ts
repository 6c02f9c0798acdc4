import { describe, expect, it } from 'vitest';
import { exportFilename, exportJson, exportMarkdown, fence, inline, MARKDOWN_TOOL_OUTPUT_MAX, type ExportChanges } from '../../src/core/sessions/session-export.js';

const session = { sessionId: '11111111-2222-4333-8444-555555555555', title: 'Fix the build', templateSlug: 'reviewer', createdAt: new Date('2026-11-01T10:00:00Z'), updatedAt: new Date('2026-11-02T11:30:00Z') };
const at = new Date('2026-11-28T23:00:00Z');
const t0 = Date.parse('2026-11-01T10:00:00Z');

const messages = [
  { info: { id: 'msg_1', role: 'user', time: { created: t0 } }, parts: [{ id: 'p1', type: 'text', text: 'Why does `npm test` fail?' }] },
  {
    info: { id: 'msg_2', role: 'assistant', parentID: 'msg_1', time: { created: t0 + 1000, completed: t0 + 5000 } },
    parts: [
      { id: 'p2', type: 'reasoning', text: 'thinking hard' },
      { id: 'p3', type: 'tool', tool: 'bash', state: { status: 'completed', title: 'run the tests', input: { command: 'npm test' }, output: 'FAIL src/a.test.ts\n```\nnot a fence end\n```' } },
      { id: 'p4', type: 'text', text: 'A test expects **2**; the code returns 3.' },
      { id: 'p5', type: 'text', text: 'injected', synthetic: true },
    ],
  },
  { info: { id: 'msg_3', role: 'assistant', parentID: 'msg_1', time: { created: t0 + 6000 }, error: { name: 'TurnLost', data: { message: 'the runtime stopped' } } }, parts: [] },
];

const changes: ExportChanges = {
  files: [
    { path: 'src/a.ts', status: 'modified', additions: 1, deletions: 1, binary: false, diff: '--- a/src/a.ts\n+++ b/src/a.ts\n@@ -1 +1 @@\n-return 3;\n+return 2;\n', truncated: false },
    { path: 'logo.png', status: 'added', additions: 0, deletions: 0, binary: true, diff: '', truncated: false },
  ],
  totals: { files: 2, additions: 1, deletions: 1 },
  turns: [{ messageId: 'msg_1', files: 2, additions: 1, deletions: 1, paths: ['src/a.ts', 'logo.png'], reverted: false }],
  recorded: true,
  snapshots: true,
};

describe('session export (Markdown and JSON)', () => {
  it('renders the conversation: who and when, text, tool calls with input and output, errors; not reasoning or injected text', () => {
    const md = exportMarkdown(session, messages, changes, at);
    expect(md.startsWith('# Fix the build\n\n- Session: `11111111-2222-4333-8444-555555555555`\n- Template: reviewer\n- Created: 2026-11-01 10:00 UTC')).toBe(true);
    expect(md).toContain('### You · 2026-11-01 10:00 UTC\n\n<a id="msg_1"></a>\n\nWhy does `npm test` fail?');
    expect(md).toContain('### Agent · 2026-11-01 10:00 UTC');
    expect(md).toContain('**Tool `bash`** (completed) — run the tests');
    expect(md).toContain('```json\n{\n  "command": "npm test"\n}\n```');
    expect(md).toContain('A test expects **2**; the code returns 3.');
    expect(md).not.toContain('thinking hard');
    expect(md).not.toContain('injected');
    expect(md).toContain('> **TurnLost:** the runtime stopped');
    expect(md.endsWith('\n')).toBe(true);
  });

  it('fences tool output so the agent\'s own backticks cannot close it early', () => {
    const md = exportMarkdown(session, messages, null, at);
    // The output holds a run of three backticks: its fence has four.
    expect(md).toContain('````\nFAIL src/a.test.ts\n```\nnot a fence end\n```\n````');
    expect(fence('a ````` b')).toBe('``````\na ````` b\n``````');
    expect(fence('plain', 'diff')).toBe('```diff\nplain\n```');
  });

  it('cuts long tool output in Markdown and says where the rest is', () => {
    const long = [{ info: { id: 'msg_9', role: 'assistant', time: { created: t0, completed: t0 } }, parts: [{ type: 'tool', tool: 'read', state: { status: 'completed', output: 'x'.repeat(MARKDOWN_TOOL_OUTPUT_MAX + 10) } }] }];
    const md = exportMarkdown(session, long, null, at);
    expect(md).toContain('… (10 more characters in the JSON export)');
    expect(md).not.toContain('x'.repeat(MARKDOWN_TOOL_OUTPUT_MAX + 1));
  });

  it('lists the workspace changes with their diffs, or says why there are none', () => {
    const md = exportMarkdown(session, messages, changes, at);
    expect(md).toContain('## Changes in the workspace\n\n2 files changed, +1 −1.');
    expect(md).toContain('| src/a.ts | modified | 1 | 1 |');
    expect(md).toContain('| logo.png | added | 0 | 0 |');
    expect(md).toContain('#### src/a.ts\n\n```diff\n--- a/src/a.ts');
    expect(md).not.toContain('#### logo.png');
    expect(exportMarkdown(session, [], null, at, 'The workspace changes could not be read: runner gone')).toContain('_The workspace changes could not be read: runner gone_');
    expect(exportMarkdown(session, [], { ...changes, snapshots: false, files: [] }, at)).toContain('keeps no snapshots');
    expect(exportMarkdown(session, [], { ...changes, files: [] }, at)).toContain('_No files changed._');
    expect(exportMarkdown(session, [], null, at)).toContain('_No messages yet._');
  });

  it('keeps headings and table cells one line: a title or path cannot start markup of its own', () => {
    const md = exportMarkdown({ ...session, title: 'Evil\n# Injected heading | x' }, [], { ...changes, files: [{ ...changes.files[0], path: 'a|b\n## c' }] }, at);
    expect(md.startsWith('# Evil \\# Injected heading \\| x\n')).toBe(true);
    expect(md).toContain('| a\\|b \\#\\# c | modified |');
    expect(md.split('\n').filter((l) => l.startsWith('#'))).toEqual(['# Evil \\# Injected heading \\| x', '## Conversation', '## Changes in the workspace', '#### a\\|b \\#\\# c']);
    expect(inline('a\r\nb')).toBe('a b');
  });

  it('JSON keeps the transcript as it is, with the session and changes', () => {
    const doc = exportJson(session, messages, changes, at);
    expect(doc).toEqual({
      format: 'agentws.session-export',
      version: 1,
      exportedAt: '2026-11-28T23:00:00.000Z',
      session: { sessionId: session.sessionId, title: 'Fix the build', templateSlug: 'reviewer', createdAt: '2026-11-01T10:00:00.000Z', updatedAt: '2026-11-02T11:30:00.000Z' },
      messages,
      changes,
    });
    expect(exportJson(session, [], null, at, 'why').changesNote).toBe('why');
  });

  it('names the file after the title and the day, never a path', () => {
    expect(exportFilename('Fix the build', at, 'md')).toBe('fix-the-build-2026-11-28.md');
    expect(exportFilename('../../etc/passwd', at, 'json')).toBe('etcpasswd-2026-11-28.json');
    expect(exportFilename('Café "quotes" \\ and / slashes', at, 'md')).toBe('cafe-quotes-and-slashes-2026-11-28.md');
    expect(exportFilename('日本語', at, 'md')).toBe('session-2026-11-28.md');
  });
});
