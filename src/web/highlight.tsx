import type { ComponentChildren } from 'preact';
import { languageOf, tokenizeLine, type Family } from './highlight-tokens';

// Syntax colour as elements (the rules are in highlight-tokens.ts): never an HTML string.
export { languageOf };

/** One line's tokens as elements: coloured tokens in spans, the rest as text. */
export function highlightLine(line: string, family: Family): ComponentChildren[] {
  return tokenizeLine(line, family).map((t) => (t.cls ? <span class={t.cls}>{t.text}</span> : t.text));
}

/** A block of code, coloured line by line (`lang`: a fence's info string or a file name). */
export function Code(props: { text: string; lang?: string }) {
  const family = languageOf(props.lang);
  const lines = props.text.split('\n');
  return (
    <code class={`hl hl-${family}`}>
      {lines.map((l, i) => (
        <>
          {highlightLine(l, family)}
          {i < lines.length - 1 ? '\n' : null}
        </>
      ))}
    </code>
  );
}
