/**
 * The string rule of the API: well-formed Unicode (no lone surrogates) without U+0000. PostgreSQL text
 * refuses NUL and jsonb refuses both, and neither is anything a person meant to send.
 */
export const isCleanString = (s: string): boolean => s.isWellFormed() && !s.includes('\0');

/** The nearest string that keeps the rule: lone surrogates become U+FFFD, NULs are dropped. */
export const cleanString = (s: string): string => s.toWellFormed().replaceAll('\0', '');

declare global {
  // ES2024, in Node since 20; the project's lib setting is ES2023.
  interface String {
    isWellFormed(): boolean;
    toWellFormed(): string;
  }
}
