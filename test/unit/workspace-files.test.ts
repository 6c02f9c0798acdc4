import { describe, expect, it } from 'vitest';
import { contentTypeOf, servedInline, splitPath } from '../../src/core/runtime/host/workspace-files.js';

describe('workspace file paths (pure rules)', () => {
  it('takes relative paths, the workspace itself as "" or "."', () => {
    expect(splitPath('')).toEqual([]);
    expect(splitPath('.')).toEqual([]);
    expect(splitPath('src/app.ts')).toEqual(['src', 'app.ts']);
    expect(splitPath('a b/ü.txt')).toEqual(['a b', 'ü.txt']);
  });
  it('refuses .., ., absolute paths, NUL and empty names, naming the field', () => {
    for (const [p, why] of [
      ['../x', '".."'],
      ['a/../../etc/passwd', '".."'],
      ['/etc/shadow', 'absolute'],
      ['a\0b', 'NUL'],
      ['a//b', 'empty name'],
      ['a/', 'empty name'],
      ['./a', '"."'],
      ['x'.repeat(300), 'longer than 255'],
    ]) {
      expect(() => splitPath(p), p).toThrow(why);
      expect(() => splitPath(p, 'dir'), p).toThrow(/^dir: /);
    }
  });
  it('serves in place only plain text, raster images, JSON and PDF: never HTML or SVG', () => {
    expect(contentTypeOf('notes.md')).toBe('text/plain; charset=utf-8');
    expect(contentTypeOf('Makefile')).toBe('text/plain; charset=utf-8');
    expect(contentTypeOf('chart.PNG')).toBe('image/png');
    expect(contentTypeOf('blob.bin')).toBe('application/octet-stream');
    expect(servedInline(contentTypeOf('a.txt'))).toBe(true);
    expect(servedInline(contentTypeOf('a.png'))).toBe(true);
    expect(servedInline(contentTypeOf('a.pdf'))).toBe(true);
    expect(servedInline(contentTypeOf('a.svg'))).toBe(false);
    expect(servedInline(contentTypeOf('a.html'))).toBe(false);
    expect(servedInline(contentTypeOf('a.xhtml'))).toBe(false);
    expect(servedInline(contentTypeOf('a.bin'))).toBe(false);
  });
});
