import { describe, expect, it } from 'vitest';
import { inline, parseMarkdown, safeHref, type Block } from '../../src/web/markdown-parse.js';

/** The blocks without their sources (what the tree says, not where it was read from). */
const parse = (text: string, o?: { frontMatter?: boolean }): Block[] => parseMarkdown(text, o).map(({ src: _src, ...b }) => b as Block);

describe('Markdown parsing (the chat and SKILL.md)', () => {
  it('reads headings, paragraphs, rules and setext headings', () => {
    expect(parse('# Title\n\nSome *text*\non two lines.\n\n---\n\nSub\n===')).toEqual([
      { t: 'h', level: 1, children: ['Title'] },
      { t: 'p', children: ['Some ', { t: 'i', children: ['text'] }, '\non two lines.'] },
      { t: 'hr' },
      { t: 'h', level: 1, children: ['Sub'] },
    ]);
    expect(parse('###### six ##')).toEqual([{ t: 'h', level: 6, children: ['six'] }]);
    expect(parse('####### seven')).toEqual([{ t: 'p', children: ['####### seven'] }]);
  });

  it('reads fenced code with its language, keeps it verbatim, and marks a fence still open', () => {
    expect(parse('```ts\nconst a = **1**; // <b>\n```\nafter')).toEqual([
      { t: 'code', lang: 'ts', text: 'const a = **1**; // <b>', open: false },
      { t: 'p', children: ['after'] },
    ]);
    expect(parse('~~~\nx\n```\ny')).toEqual([{ t: 'code', lang: '', text: 'x\n```\ny', open: true }]);
    // Streaming: a fence not closed yet is code all the same.
    expect(parse('Here:\n```python\nprint(1)')).toEqual([
      { t: 'p', children: ['Here:'] },
      { t: 'code', lang: 'python', text: 'print(1)', open: true },
    ]);
  });

  it('reads lists: bullets, numbered from their start, nested, with code inside an item', () => {
    expect(parse('- one\n- two **b**\n  - nested\n- three')).toEqual([
      {
        t: 'list',
        ordered: false,
        start: 1,
        items: [[{ t: 'p', children: ['one'] }], [{ t: 'p', children: ['two ', { t: 'b', children: ['b'] }] }, { t: 'list', ordered: false, start: 1, items: [[{ t: 'p', children: ['nested'] }]] }], [{ t: 'p', children: ['three'] }]],
      },
    ]);
    expect(parse('3. c\n4. d')).toEqual([{ t: 'list', ordered: true, start: 3, items: [[{ t: 'p', children: ['c'] }], [{ t: 'p', children: ['d'] }]] }]);
    const [list] = parse('1. run:\n\n   ```sh\n   npm test\n   ```\n2. done') as Array<Extract<Block, { t: 'list' }>>;
    expect(list.items).toHaveLength(2);
    expect(list.items[0]).toEqual([{ t: 'p', children: ['run:'] }, { t: 'code', lang: 'sh', text: 'npm test', open: false }]);
    // A paragraph after a list is not an item.
    expect(parse('- a\n\nafter').map((b) => b.t)).toEqual(['list', 'p']);
  });

  it('reads tables with alignment, pipes in code, and short rows', () => {
    expect(parse('| Name | Size |\n|:-----|-----:|\n| `a|b` | 1 |\n| c |')).toEqual([
      {
        t: 'table',
        align: ['left', 'right'],
        head: [['Name'], ['Size']],
        rows: [
          [[{ t: 'code', text: 'a|b' }], ['1']],
          [['c'], []],
        ],
      },
    ]);
    // Without its rule line, pipes are text.
    expect(parse('a | b')).toEqual([{ t: 'p', children: ['a | b'] }]);
  });

  it('reads quotes', () => {
    expect(parse('> quoted **x**\n> more')).toEqual([{ t: 'quote', children: [{ t: 'p', children: ['quoted ', { t: 'b', children: ['x'] }, '\nmore'] }] }]);
  });

  it('keeps raw HTML as text: nothing in the tree is markup', () => {
    const tree = parse('<img src=x onerror="alert(1)">\n\n<script>alert(2)</script> and <b>bold</b>');
    expect(tree).toEqual([
      { t: 'p', children: ['<img src=x onerror="alert(1)">'] },
      { t: 'p', children: ['<script>alert(2)</script> and <b>bold</b>'] },
    ]);
  });

  it('links only http(s) addresses; other schemes keep their label as text', () => {
    expect(inline('see [the docs](https://example.com/a_b?x=1 "title") now')).toEqual(['see ', { t: 'a', href: 'https://example.com/a_b?x=1', children: ['the docs'] }, ' now']);
    expect(inline('[click](javascript:alert(1))')).toEqual(['click']);
    expect(inline('[x](data:text/html,<script>)')).toEqual(['x']);
    expect(inline('![chart](https://example.com/c.png)')).toEqual([{ t: 'a', href: 'https://example.com/c.png', children: ['chart'] }]);
    expect(inline('bare https://example.com/path. done')).toEqual(['bare ', { t: 'a', href: 'https://example.com/path', children: ['https://example.com/path'] }, '. done']);
    expect(safeHref('HTTPS://EXAMPLE.COM')).toBe('HTTPS://EXAMPLE.COM');
    expect(safeHref('//evil.example')).toBeNull();
    expect(safeHref('https://x" onmouseover="a')).toBeNull();
  });

  it('reads inline code, bold, italic, strike, escapes, and leaves snake_case and lone stars alone', () => {
    expect(inline('`a *b*` **bold _it_** ~~gone~~ \\*not\\*')).toEqual([
      { t: 'code', text: 'a *b*' },
      ' ',
      { t: 'b', children: ['bold ', { t: 'i', children: ['it'] }] },
      ' ',
      { t: 's', children: ['gone'] },
      ' *not*',
    ]);
    expect(inline('snake_case_name and 2 * 3 * 4')).toEqual(['snake_case_name and 2 * 3 * 4']);
    expect(inline('``code with ` tick``')).toEqual([{ t: 'code', text: 'code with ` tick' }]);
    expect(inline('**unclosed')).toEqual(['**unclosed']);
  });

  it('keeps a skill\'s front matter apart, and gives each top-level block its source', () => {
    const blocks = parseMarkdown('---\nname: x\n---\n# Skill\n\ntext', { frontMatter: true });
    expect(blocks.map((b) => [b.t, b.src])).toEqual([
      ['front', '---\nname: x\n---'],
      ['h', '# Skill'],
      ['p', 'text'],
    ]);
    expect(parse('---\nnot front\n---')[0]).toEqual({ t: 'hr' });
  });

  it('parses a long streamed answer in time linear in its length (it is parsed again every frame)', () => {
    // Relative, not a wall-clock limit: four times the answer may take at most about four times as long
    // (a rule that rescans what it has parsed would take sixteen). The fastest of several runs each.
    const answer = (parts: number) => Array.from({ length: parts }, (_, i) => `## Part ${i}\n\nSome **text** with \`code\` and a [link](https://example.com/${i}).\n\n- a\n- b\n\n\`\`\`js\nconst x = ${i};\n\`\`\`\n`).join('\n');
    const fastest = (md: string) => {
      let best = Infinity;
      for (let k = 0; k < 7; k++) {
        const t0 = performance.now();
        parseMarkdown(md);
        best = Math.min(best, performance.now() - t0);
      }
      return best;
    };
    const small = answer(200);
    const large = answer(800);
    expect(large.length).toBeGreaterThan(80_000);
    fastest(small); // warm the JIT before measuring
    expect(fastest(large) / fastest(small)).toBeLessThan(8);
  });
});
