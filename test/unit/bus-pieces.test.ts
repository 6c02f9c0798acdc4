import { describe, expect, it } from 'vitest';
import { utf8Pieces } from '../../src/db/event-bus.js';

describe('event bus: a payload over NOTIFY\'s limit in pieces', () => {
  it('cuts UTF-8 text into pieces within the limit, never inside a character, and puts it back whole', () => {
    const samples = ['', 'abc', 'x'.repeat(20_000), 'é✓😀'.repeat(4000), `${'a'.repeat(7799)}😀${'b'.repeat(10)}`, `${'a'.repeat(7798)}é✓`];
    for (const text of samples) {
      const pieces = utf8Pieces(text, 7800);
      expect(pieces.join('')).toBe(text);
      for (const p of pieces) {
        expect(Buffer.byteLength(p)).toBeLessThanOrEqual(7800);
        expect(p).not.toContain('\uFFFD');
      }
      expect(pieces.every((p) => p.length > 0)).toBe(true);
      // Full pieces but where a character would have been cut.
      expect(pieces.length).toBeLessThanOrEqual(Math.ceil(Buffer.byteLength(text) / 7797));
    }
  });
});
