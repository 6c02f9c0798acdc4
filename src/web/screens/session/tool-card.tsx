import type { ComponentChildren } from 'preact';
import { highlightLine, languageOf, Code } from '../../highlight';
import type { Part } from '../../types';

const OUTPUT_SHOWN = 4000;
/** Lines of a diff or a written file shown at most (the rest is counted). */
const LINES_SHOWN = 400;

/**
 * A tool call as a collapsible card: its status and command, its output (cut). An edit shows its change
 * as a coloured unified diff (opencode puts one in the edit tool's `metadata.diff`), a write the file it
 * wrote, both with the file's syntax colour.
 */
export function ToolCard(props: { part: Part }) {
  const s = props.part.state ?? {};
  const command = s.input?.command ?? s.input?.filePath ?? s.input?.url ?? s.input?.pattern ?? s.title ?? '';
  const output = s.error ?? s.output ?? '';
  const file = typeof s.input?.filePath === 'string' ? s.input.filePath : undefined;
  const diff = typeof s.metadata?.diff === 'string' && s.metadata.diff.trim() ? s.metadata.diff : null;
  const written = !diff && props.part.tool === 'write' && typeof s.input?.content === 'string' ? (s.input.content as string) : null;
  return (
    <details class={`tool ${s.status ?? ''}`} data-testid="tool" open={(diff || written) && s.status === 'completed' ? true : undefined}>
      <summary>
        <b>{props.part.tool}</b> <span class="state">{s.status}</span> <code>{String(command).slice(0, 200)}</code>
      </summary>
      {diff ? <Diff text={diff} file={file} /> : null}
      {written !== null ? <WrittenFile text={written} file={file} /> : null}
      {output && !(diff && s.status === 'completed') ? <pre>{output.length > OUTPUT_SHOWN ? `${output.slice(0, OUTPUT_SHOWN)}\n… (${output.length - OUTPUT_SHOWN} more characters)` : output}</pre> : null}
    </details>
  );
}

/** A unified diff, each line coloured as added, removed, a hunk header or context, the code by its file's language. */
function Diff(props: { text: string; file?: string }) {
  const family = languageOf(props.file);
  const lines = props.text.replace(/\n$/, '').split('\n');
  const shown = lines.slice(0, LINES_SHOWN);
  return (
    <pre class="diff" data-testid="diff">
      {shown.map((line, i): ComponentChildren => {
        const kind = /^(\+\+\+|---) /.test(line) || /^(Index:|diff |=+$)/.test(line) ? 'file' : line.startsWith('@@') ? 'hunk' : line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : line.startsWith('\\') ? 'meta' : 'ctx';
        const code = kind === 'add' || kind === 'del' || kind === 'ctx' ? (
          <>
            <span class="sign">{line.slice(0, 1) || ' '}</span>
            {highlightLine(line.slice(1), family)}
          </>
        ) : (
          line
        );
        return (
          <span key={i} class={`dl dl-${kind}`}>
            {code}
            {'\n'}
          </span>
        );
      })}
      {lines.length > shown.length ? <span class="dl dl-meta">… {lines.length - shown.length} more lines</span> : null}
    </pre>
  );
}

function WrittenFile(props: { text: string; file?: string }) {
  const lines = props.text.split('\n');
  const shown = lines.length > LINES_SHOWN ? lines.slice(0, LINES_SHOWN).join('\n') : props.text;
  return (
    <pre class="written" data-testid="written">
      <Code text={shown} lang={props.file} />
      {lines.length > LINES_SHOWN ? `\n… ${lines.length - LINES_SHOWN} more lines` : null}
    </pre>
  );
}
