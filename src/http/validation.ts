import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import ajvFormats from 'ajv-formats';
import { isCleanString } from '../lib/clean-string.js';

/**
 * Request validation: the validator compiler every route's schemas go through.
 *
 * - Bodies are typed exactly: `{"title":123}` is 400, not the string "123", and `null` is not `false`.
 *   Query strings, path params and headers arrive as text, so only they are coerced to the schema's
 *   types (`?limit=10`, a repeated query key as an array). Two Ajv instances, one per rule, with the
 *   options and formats fastify's own compiler uses.
 * - Every string a request carries into the service (values and property names, at any depth) is
 *   well-formed Unicode without U+0000: PostgreSQL text refuses NUL and jsonb refuses lone surrogates, and
 *   neither is anything a person meant. Checked once here, after the schema passed, and reported through
 *   the validator's errors so fastify answers 400 `validation_failed` naming the field
 *   (`body/title must be valid Unicode without NUL characters`).
 */

/** The message of the string rule; also used for multipart fields, which no schema sees. */
export const STRING_RULE = 'must be valid Unicode without NUL characters';
const KEY_RULE = 'must have property names of valid Unicode without NUL characters';

const COMMON: Options = { useDefaults: true, removeAdditional: false, allErrors: false, addUsedSchema: false };

type HttpPart = 'body' | 'querystring' | 'params' | 'headers' | string | undefined;
export type Validator = ((data: unknown, dataCxt?: unknown) => boolean) & { errors?: ErrorObject[] | null; schemaEnv?: unknown };

function newAjv(coerceTypes: false | 'array', shared: Record<string, unknown>): Ajv {
  const ajv = new Ajv({ ...COMMON, coerceTypes });
  ajvFormats.default(ajv);
  for (const schema of Object.values(shared)) ajv.addSchema(schema as object);
  return ajv;
}

function compile(ajv: Ajv, schema: Record<string, unknown>): ValidateFunction {
  // As fastify's compiler does: a schema with an id is compiled once per instance.
  const id = typeof schema.$id === 'string' ? schema.$id : undefined;
  return (id && ajv.getSchema(id)) || ajv.compile(schema);
}

/**
 * fastify's `schemaController.compilersFactory.buildValidator`: called with the shared schemas
 * (app.addSchema) of a plugin context; the same set gets the same pair of Ajv instances.
 */
export function validatorCompilerFactory() {
  const pool = new Map<string, (route: { schema: Record<string, unknown>; httpPart?: HttpPart }) => Validator>();
  return (shared: Record<string, unknown>) => {
    const key = JSON.stringify(shared);
    let compiler = pool.get(key);
    if (!compiler) {
      const exact = newAjv(false, shared);
      const coercing = newAjv('array', shared);
      compiler = ({ schema, httpPart }) => withStringRule(compile(httpPart === 'body' ? exact : coercing, schema));
      pool.set(key, compiler);
    }
    return compiler;
  };
}

let standalone: Ajv | undefined;
/** A body validator outside a route (multipart fields checked against the route's JSON schema). */
export function compileBodyValidator(schema: object): Validator {
  standalone ??= newAjv(false, {});
  return withStringRule(standalone.compile(schema));
}

/** The schema's validator, then the string rule over what passed (the same data Ajv may have filled in). */
function withStringRule(validate: ValidateFunction): Validator {
  const wrapped: Validator = (data, dataCxt) => {
    if (!validate(data, dataCxt as Parameters<ValidateFunction>[1])) {
      wrapped.errors = validate.errors;
      return false;
    }
    const bad = findUnclean(data);
    if (!bad) {
      wrapped.errors = null;
      return true;
    }
    wrapped.errors = [{ instancePath: bad.at, schemaPath: '#', keyword: 'wellFormedString', params: {}, message: bad.key ? KEY_RULE : STRING_RULE }];
    return false;
  };
  // fastify passes the request as parent data to validators that have one, so Ajv can replace a root value.
  wrapped.schemaEnv = (validate as { schemaEnv?: unknown }).schemaEnv;
  return wrapped;
}

/**
 * The JSON pointer of the first unclean string (or of the object holding an unclean property name).
 * Iterative, so a deeply nested body cannot overflow the stack; only containers are queued.
 */
export function findUnclean(root: unknown): { at: string; key: boolean } | undefined {
  if (typeof root === 'string') return isCleanString(root) ? undefined : { at: '', key: false };
  if (typeof root !== 'object' || root === null || ArrayBuffer.isView(root)) return undefined;
  const nodes: object[] = [root];
  const parent: number[] = [-1];
  const name: string[] = [''];
  const pathOf = (i: number, last?: string) => {
    let p = last === undefined ? '' : `/${escape(last)}`;
    for (; i > 0; i = parent[i]) p = `/${escape(name[i])}${p}`;
    return p;
  };
  for (let i = 0; i < nodes.length; i++) {
    const node = nodes[i];
    if (Array.isArray(node)) {
      for (let j = 0; j < node.length; j++) {
        const v: unknown = node[j];
        if (typeof v === 'string') {
          if (!isCleanString(v)) return { at: pathOf(i, String(j)), key: false };
        } else if (typeof v === 'object' && v !== null && !ArrayBuffer.isView(v)) {
          nodes.push(v);
          parent.push(i);
          name.push(String(j));
        }
      }
      continue;
    }
    for (const k of Object.keys(node)) {
      if (!isCleanString(k)) return { at: pathOf(i), key: true };
      const v: unknown = (node as Record<string, unknown>)[k];
      if (typeof v === 'string') {
        if (!isCleanString(v)) return { at: pathOf(i, k), key: false };
      } else if (typeof v === 'object' && v !== null && !ArrayBuffer.isView(v)) {
        nodes.push(v);
        parent.push(i);
        name.push(k);
      }
    }
  }
  return undefined;
}

/** A JSON-pointer segment, shortened: the path names the field, it need not repeat a long key. */
const escape = (segment: string) => (segment.length > 64 ? `${segment.slice(0, 63)}…` : segment).replace(/~/g, '~0').replace(/\//g, '~1');
