import { Component, type ComponentChildren } from 'preact';
import { useMemo, useState } from 'preact/hooks';
import { Code } from './highlight';
import { parseMarkdown, type Block, type Inline, type SourcedBlock } from './markdown-parse';

/**
 * Markdown as elements (the parsing: markdown-parse.ts): an agent's answers in the chat, a skill's
 * SKILL.md. It builds elements, never HTML strings, so whatever a model wrote stays text under the strict
 * CSP (a `<img onerror>` in an answer is shown, not run); links go only to http(s) addresses, in a new
 * tab, with no referrer and no opener. An answer streaming in is parsed again each frame (linear in its
 * length), but only the blocks whose source changed are drawn again: the last one, as a rule.
 */
export function Markdown(props: { text: string; frontMatter?: boolean; class?: string }) {
  const blocks = useMemo(() => parseMarkdown(props.text, { frontMatter: props.frontMatter ?? true }), [props.text, props.frontMatter]);
  return (
    <div class={props.class ?? 'markdown'}>
      {blocks.map((b, i) => (
        <TopBlock key={i} block={b} />
      ))}
    </div>
  );
}

/** A top-level block, drawn again only when its source changed. */
class TopBlock extends Component<{ block: SourcedBlock }> {
  shouldComponentUpdate(next: { block: SourcedBlock }): boolean {
    return next.block.src !== this.props.block.src || next.block.t !== this.props.block.t;
  }
  render() {
    return <BlockView block={this.props.block} />;
  }
}

function BlockView(props: { block: Block }): ComponentChildren {
  const b = props.block;
  switch (b.t) {
    case 'front':
      return <pre class="front">{b.text}</pre>;
    case 'h': {
      const children = inlines(b.children);
      // An answer's # is not the page's title: headings start a level down.
      const level = Math.min(b.level + 1, 6);
      return level === 2 ? <h2>{children}</h2> : level === 3 ? <h3>{children}</h3> : level === 4 ? <h4>{children}</h4> : level === 5 ? <h5>{children}</h5> : <h6>{children}</h6>;
    }
    case 'p':
      return <p>{inlines(b.children)}</p>;
    case 'hr':
      return <hr />;
    case 'code':
      return <CodeBlock text={b.text} lang={b.lang} />;
    case 'quote':
      return (
        <blockquote>
          {b.children.map((c, i) => (
            <BlockView key={i} block={c} />
          ))}
        </blockquote>
      );
    case 'list': {
      const items = b.items.map((item, i) => (
        <li key={i}>
          {item.length === 1 && item[0].t === 'p'
            ? inlines(item[0].children)
            : item.map((c, j) => (
                <BlockView key={j} block={c} />
              ))}
        </li>
      ));
      return b.ordered ? <ol start={b.start !== 1 ? b.start : undefined}>{items}</ol> : <ul>{items}</ul>;
    }
    case 'table':
      return (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                {b.head.map((c, i) => (
                  <th key={i} class={b.align[i] ? `al-${b.align[i]}` : undefined}>
                    {inlines(c)}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {b.rows.map((row, r) => (
                <tr key={r}>
                  {row.map((c, i) => (
                    <td key={i} class={b.align[i] ? `al-${b.align[i]}` : undefined}>
                      {inlines(c)}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      );
  }
}

function inlines(nodes: Inline[]): ComponentChildren[] {
  return nodes.map((n) => {
    if (typeof n === 'string') return n;
    switch (n.t) {
      case 'code':
        return <code>{n.text}</code>;
      case 'b':
        return <strong>{inlines(n.children)}</strong>;
      case 'i':
        return <em>{inlines(n.children)}</em>;
      case 's':
        return <del>{inlines(n.children)}</del>;
      case 'a':
        return (
          <a href={n.href} target="_blank" rel="noopener noreferrer">
            {inlines(n.children)}
          </a>
        );
    }
  });
}

/** A fenced code block: coloured by its language, with a button that copies its text. */
function CodeBlock(props: { text: string; lang: string }) {
  const [copied, setCopied] = useState<'yes' | 'no' | null>(null);
  const copy = () =>
    navigator.clipboard.writeText(props.text).then(
      () => {
        setCopied('yes');
        setTimeout(() => setCopied(null), 1500);
      },
      () => setCopied('no'),
    );
  return (
    <div class="code-block" data-testid="code-block">
      <div class="code-head">
        <span class="lang">{props.lang}</span>
        <button type="button" class="link copy" onClick={copy} aria-label="Copy code">
          {copied === 'yes' ? 'Copied' : copied === 'no' ? 'Copy failed' : 'Copy'}
        </button>
      </div>
      <pre>
        <Code text={props.text} lang={props.lang} />
      </pre>
    </div>
  );
}
