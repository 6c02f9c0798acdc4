/**
 * Messages that name a setting (`set AGENTWS_RUNTIME_MAX`, `turned off (AGENTWS_RUNTIME_SNAPSHOTS=off)`)
 * with each name a link to its entry in the configuration reference, where its meaning, default and
 * form are. The reference is generated from the config schema (docs/reference/configuration.md, one
 * `## AGENTWS_X` heading a setting), so every setting has an entry, at the heading's anchor.
 */

/** The page the settings are described on, served by the appliance (src/http/routes/docs.routes.ts). */
const CONFIGURATION_REFERENCE = '/docs/reference/configuration';

/** A setting's name as it appears in a message (the last character a letter or digit: `AGENTWS_X_` in `AGENTWS_X_{A,B}` is no name). */
const SETTING = /\bAGENTWS_[A-Z0-9_]*[A-Z0-9]\b/g;

/** The heading's anchor, by GitHub's rules the docs follow: `## AGENTWS_X` → `agentws_x`. */
export const settingHref = (name: string) => `${CONFIGURATION_REFERENCE}#${name.toLowerCase()}`;

/** The message cut into its text and the setting names in it, in order (pure: unit-tested). */
export function settingParts(text: string): Array<{ text: string; setting?: true }> {
  const parts: Array<{ text: string; setting?: true }> = [];
  let at = 0;
  for (const m of text.matchAll(SETTING)) {
    if (m.index > at) parts.push({ text: text.slice(at, m.index) });
    parts.push({ text: m[0], setting: true });
    at = m.index + m[0].length;
  }
  if (at < text.length) parts.push({ text: text.slice(at) });
  return parts;
}
