import type { ComponentChildren } from 'preact';

/**
 * A small Markdown renderer for SKILL.md (headings, lists, fenced code, paragraphs, `code`, **bold**):
 * it builds elements, never HTML strings, so whatever a model wrote stays text.
 */
export function Markdown(props: { text: string }) {
  const blocks: ComponentChildren[] = [];
  const lines = props.text.replace(/\r\n/g, '\n').split('\n');
  let i = 0;
  // YAML front matter: shown as code, it is what the agent matches the skill by.
  if (lines[0] === '---') {
    const end = lines.indexOf('---', 1);
    if (end > 0) {
      blocks.push(<pre class="front">{lines.slice(1, end).join('\n')}</pre>);
      i = end + 1;
    }
  }
  while (i < lines.length) {
    const line = lines[i];
    if (line.startsWith('```')) {
      const body: string[] = [];
      for (i++; i < lines.length && !lines[i].startsWith('```'); i++) body.push(lines[i]);
      i++;
      blocks.push(<pre>{body.join('\n')}</pre>);
      continue;
    }
    const h = /^(#{1,4})\s+(.*)$/.exec(line);
    if (h) {
      const level = Math.min(h[1].length + 1, 5);
      blocks.push(level === 2 ? <h2>{inline(h[2])}</h2> : level === 3 ? <h3>{inline(h[2])}</h3> : <h4>{inline(h[2])}</h4>);
      i++;
      continue;
    }
    if (/^\s*([-*]|\d+\.)\s+/.test(line)) {
      const ordered = /^\s*\d+\./.test(line);
      const items: ComponentChildren[] = [];
      for (; i < lines.length && /^\s*([-*]|\d+\.)\s+/.test(lines[i]); i++) items.push(<li>{inline(lines[i].replace(/^\s*([-*]|\d+\.)\s+/, ''))}</li>);
      blocks.push(ordered ? <ol>{items}</ol> : <ul>{items}</ul>);
      continue;
    }
    if (!line.trim()) {
      i++;
      continue;
    }
    const para: string[] = [];
    for (; i < lines.length && lines[i].trim() && !/^(#{1,4}\s|```|\s*([-*]|\d+\.)\s)/.test(lines[i]); i++) para.push(lines[i]);
    blocks.push(<p>{inline(para.join(' '))}</p>);
  }
  return <div class="markdown">{blocks}</div>;
}

function inline(text: string): ComponentChildren[] {
  return text.split(/(`[^`]+`|\*\*[^*]+\*\*)/).map((piece) => (piece.startsWith('`') && piece.endsWith('`') && piece.length > 1 ? <code>{piece.slice(1, -1)}</code> : piece.startsWith('**') && piece.endsWith('**') && piece.length > 4 ? <b>{piece.slice(2, -2)}</b> : piece));
}
