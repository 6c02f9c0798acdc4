import { describe, expect, it } from 'vitest';
import { languageOf, tokenizeLine } from '../../src/web/highlight-tokens.js';

// A token as the dashboard shows it: the class of its span (null: plain text) and its text.
const tokens = (line: string, lang: string) => tokenizeLine(line, languageOf(lang)).map((t) => [t.cls, t.text] as const);

describe('syntax colour', () => {
  it('knows a language by a fence name or a file name', () => {
    expect(languageOf('ts')).toBe('c');
    expect(languageOf('src/app/main.py')).toBe('hash');
    expect(languageOf('Dockerfile')).toBe('hash');
    expect(languageOf('query.SQL')).toBe('sql');
    expect(languageOf('notes.txt')).toBe('plain');
    expect(languageOf(undefined)).toBe('plain');
  });

  it('colours keywords, strings, numbers and comments, and keeps every character', () => {
    const line = 'const x = "a // not a comment" + 42; // done';
    const t = tokens(line, 'js');
    expect(t.map(([, s]) => s).join('')).toBe(line);
    expect(t).toContainEqual(['tok-kw', 'const']);
    expect(t).toContainEqual(['tok-str', '"a // not a comment"']);
    expect(t).toContainEqual(['tok-num', '42']);
    expect(t).toContainEqual(['tok-com', '// done']);
  });

  it('leaves markup as text: a tag is coloured, never made an element', () => {
    const line = '<img src=x onerror="alert(1)">';
    const t = tokens(line, 'html');
    expect(t.map(([, s]) => s).join('')).toBe(line);
    expect(t).toContainEqual(['tok-kw', '<img']);
    expect(t).toContainEqual(['tok-str', '"alert(1)"']);
  });

  it('shows plain text and very long lines as they are', () => {
    expect(tokens('if x then y', 'txt')).toEqual([[null, 'if x then y']]);
    const long = 'x'.repeat(3000);
    expect(tokens(long, 'js')).toEqual([[null, long]]);
  });
});
