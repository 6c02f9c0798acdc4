/**
 * A refused request in the words a form shows (pure, unit-tested: test/unit/web-refusal.test.ts).
 *
 * What a refusal carries (src/http/error-handler.ts): `{ error, message, hint?, details? }`. A schema
 * refusal (400 `validation_failed`, src/http/validation.ts) names the input in its message as a path,
 * `body/models/0/inputCostPerMTok must be >= 0`, in Ajv's words; a service's own refusal names it in
 * `details.field` (`settings.egress.allow`) or opens its message with it (`title must not be empty`,
 * `days: at most 90`). `refusalOf` turns either into the input's dotted path (`models.0.inputCostPerMTok`)
 * and a sentence for under that input (`Must be 0 or more.`), plus the whole sentence for a form that
 * shows it at its top (no input of the form has that path).
 */

export interface RefusalSource {
  status: number;
  code?: string;
  message: string;
  hint?: string;
  details?: unknown;
}

export interface Refusal {
  /** The input the refusal is about, as a dotted path (`models.0.id`); absent when it names none. */
  field?: string;
  /** In plain words, for under that input (does not repeat the input's name). */
  message: string;
  /** In plain words, naming the input: for the form's general note. */
  full: string;
}

/** Ajv's rule messages (validation.ts compiles every route's schema with Ajv) in plain words. */
const RULES: Array<[RegExp, (...m: string[]) => string]> = [
  [/^must be >= (\S+)$/, (n) => `Must be ${n} or more.`],
  [/^must be > (\S+)$/, (n) => `Must be more than ${n}.`],
  [/^must be <= (\S+)$/, (n) => `Must be ${n} or less.`],
  [/^must be < (\S+)$/, (n) => `Must be less than ${n}.`],
  [/^must be multiple of (\S+)$/, (n) => `Must be a multiple of ${n}.`],
  [/^must NOT have fewer than 1 characters?$/, () => 'Must not be empty.'],
  [/^must NOT have fewer than (\d+) characters?$/, (n) => `Must be at least ${n} characters long.`],
  [/^must NOT have more than (\d+) characters?$/, (n) => `Must be at most ${n} characters long.`],
  [/^must NOT have fewer than 1 items?$/, () => 'Give at least one.'],
  [/^must NOT have fewer than (\d+) items?$/, (n) => `Give at least ${n}.`],
  [/^must NOT have more than (\d+) items?$/, (n) => `Give at most ${n}.`],
  [/^must NOT have duplicate items.*$/, () => 'Has the same entry twice.'],
  [/^must match pattern ".*"$/, () => 'Has characters that are not allowed here.'],
  [/^must match format "(uri|url)"$/, () => 'Must be a full URL, such as https://example.com.'],
  [/^must match format "email"$/, () => 'Must be an email address.'],
  [/^must match format "uuid"$/, () => 'Must be an id (a UUID).'],
  [/^must match format "date-time"$/, () => 'Must be a date and time.'],
  [/^must match format "date"$/, () => 'Must be a date.'],
  [/^must match format "(hostname|idn-hostname)"$/, () => 'Must be a host name, such as git.example.com.'],
  [/^must match format "(ipv4|ipv6)"$/, () => 'Must be an IP address.'],
  [/^must match format "(.+)"$/, (f) => `Must be a valid ${f}.`],
  [/^must be integer$/, () => 'Must be a whole number.'],
  [/^must be number$/, () => 'Must be a number.'],
  [/^must be string$/, () => 'Must be text.'],
  [/^must be boolean$/, () => 'Must be yes or no.'],
  [/^must be array$/, () => 'Must be a list.'],
  [/^must be object$/, () => 'Must be a group of settings.'],
  [/^must be null$/, () => 'Must be left empty.'],
  [/^must be equal to one of the allowed values$/, () => 'Must be one of the choices offered.'],
  [/^must be equal to constant$/, () => 'Must be the value offered.'],
  [/^must NOT have additional properties$/, () => 'Has a setting the service does not know.'],
  [/^must match (exactly one|a) schema in (oneOf|anyOf)$/, () => 'Is not in a form the service accepts.'],
  [/^must be valid Unicode without NUL characters$/, () => 'Has characters that cannot be stored (a NUL character or broken Unicode).'],
  [/^must have property names of valid Unicode without NUL characters$/, () => 'Has names with characters that cannot be stored.'],
];

/** "body/models/0/id", "models[0].id", "models.0.id" -> "models.0.id". */
export function fieldPath(path: string): string {
  return path
    .replace(/^(body|querystring|params|headers)(\/|$)/, '')
    .replace(/\[(\d+)\]/g, '.$1')
    .replaceAll('/', '.')
    .replace(/^\.+|\.+$/g, '');
}

/** The input's path as a person reads it: "models.0.inputCostPerMTok" -> "models 1 input cost per m tok". */
export function fieldLabel(path: string): string {
  return path
    .split('.')
    .map((p) => (/^\d+$/.test(p) ? String(Number(p) + 1) : p.replace(/([a-z])([A-Z])/g, '$1 $2').replaceAll('_', ' ').toLowerCase()))
    .join(' ');
}

const capital = (s: string) => (s ? s[0].toUpperCase() + s.slice(1) : s);

const sentence = (s: string) => {
  const t = s.trim();
  if (!t) return t;
  // A sentence opening with a plain word gets its capital; one opening with a name as written
  // (settings.groupTeamMapping, webhookUrl, a model id) keeps it as it is.
  const word = /^\S+/.exec(t)![0];
  const first = /^[a-z]+[,:]?$/.test(word) ? t[0].toUpperCase() + t.slice(1) : t;
  return /[.!?)]$/.test(first) ? first : `${first}.`;
};

/** A rule message in plain words; unknown ones as a sentence of their own. */
export function plainRule(rule: string): string {
  for (const [re, say] of RULES) {
    const m = re.exec(rule.trim());
    if (m) return say(...m.slice(1));
  }
  return sentence(rule);
}

/** A schema refusal's message: "body/a/0/b must ..." or "body must have required property 'x'". */
function schemaRefusal(message: string): Refusal | null {
  const m = /^(body|querystring|params|headers)(\/\S*)? (must .*)$/s.exec(message);
  if (!m) return null;
  let field = fieldPath(`${m[1]}${m[2] ?? ''}`);
  let rule = m[3];
  const required = /^must have required property '([^']+)'$/.exec(rule);
  if (required) {
    field = field ? `${field}.${required[1]}` : required[1];
    rule = '';
  }
  const said = required ? 'Required.' : plainRule(rule);
  return { field: field || undefined, message: said, full: field ? `${capital(fieldLabel(field))}: ${said[0].toLowerCase()}${said.slice(1)}` : said };
}

/** Where a message opens with the field it names ("days: at most 90", "title must not be empty"), the rest. */
function afterField(message: string, field: string): string | null {
  const names = [field, field.replace(/\.(\d+)(?=\.|$)/g, '[$1]'), field.split('.').at(-1)!];
  for (const n of names) {
    if (!message.startsWith(n)) continue;
    const rest = message.slice(n.length);
    // "settings.egress.allow[1]: ..." under the list's input: the entry's words name the value.
    const m = /^(?:\[(\d+)\])?(?::\s+|\s+(?=(must|is|are|should|cannot|can't|may|needs?|has|was)\b))/.exec(rest);
    if (m) return m[1] !== undefined ? `Entry ${Number(m[1]) + 1}: ${rest.slice(m[0].length)}` : rest.slice(m[0].length);
  }
  return null;
}

/**
 * The refusal of an API call in plain words, placed on an input where it names one. `err` is the
 * dashboard's ApiError (or anything thrown: a network failure has no field).
 */
export function refusalOf(err: RefusalSource | Error | unknown): Refusal {
  if (!isSource(err)) {
    const text = err instanceof TypeError ? 'The service cannot be reached. Check your connection and try again.' : sentence((err as Error)?.message ?? String(err));
    return { message: text, full: text };
  }
  if (err.status === 400 && err.code === 'validation_failed') {
    const s = schemaRefusal(err.message);
    if (s) return s;
  }
  const hint = err.hint ? ` ${sentence(err.hint)}` : '';
  const detailsField = typeof (err.details as { field?: unknown } | undefined)?.field === 'string' ? fieldPath((err.details as { field: string }).field) : undefined;
  if (err.status === 403) {
    const full = `Not allowed: ${err.message}.`.replace(/\.\.$/, '.') + hint;
    return { field: detailsField, message: full, full };
  }
  if (err.code === 'runtime_not_ready') {
    // Its hint names CLI commands; in the browser the way is the checklist (screens/setup/checklist.tsx).
    const full = `${sentence(err.message)} The Sessions screen shows what is left to set up.`;
    return { message: full, full };
  }
  if (err.status === 404 && !detailsField) {
    const full = 'Not found: it may have been deleted, or it is not yours.';
    return { message: full, full };
  }
  // A service's own words: the input from details.field, else from the field its message opens with.
  let field = detailsField;
  let rest = field ? afterField(err.message, field) : null;
  if (!field && err.status >= 400 && err.status < 500) {
    const m = /^([a-zA-Z][\w]*(?:(?:\.\w+)|(?:\[\d+\]))*)(?::\s+|\s+(?=(?:must|should|cannot|needs?)\b))/.exec(err.message);
    if (m) {
      field = fieldPath(m[1]);
      rest = err.message.slice(m[0].length);
    }
  }
  const full = sentence(err.message) + hint;
  return { field, message: (rest ? sentence(rest) : sentence(err.message)) + hint, full };
}

function isSource(err: unknown): err is RefusalSource {
  return typeof err === 'object' && err !== null && typeof (err as RefusalSource).status === 'number' && typeof (err as RefusalSource).message === 'string';
}

/** Whether a refusal about `refused` belongs to the input `field`: the same path or one inside it. */
export function belongsTo(refused: string | undefined, field: string): boolean {
  if (!refused) return false;
  const f = fieldPath(field);
  return refused === f || refused.startsWith(`${f}.`);
}
