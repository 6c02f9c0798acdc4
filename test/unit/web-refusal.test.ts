import { Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { compileBodyValidator } from '../../src/http/validation.js';
import { belongsTo, fieldLabel, fieldPath, plainRule, refusalOf } from '../../src/web/refusal.js';

/** A 400 as the app answers a body its schema refuses: fastify's `body<instancePath> <Ajv message>`. */
function schema400(schema: object, body: unknown) {
  const validate = compileBodyValidator(schema);
  expect(validate(body)).toBe(false);
  const e = validate.errors![0];
  return { status: 400, code: 'validation_failed', message: `body${e.instancePath} ${e.message}` };
}

describe('refusalOf: the API\'s refusal in a form\'s words', () => {
  it('the provider form\'s refusal from the issue: under its price input, in plain words', () => {
    expect(refusalOf({ status: 400, code: 'validation_failed', message: 'body/models/0/inputCostPerMTok must be >= 0' })).toEqual({
      field: 'models.0.inputCostPerMTok',
      message: 'Must be 0 or more.',
      full: 'Models 1 input cost per mtok: must be 0 or more.',
    });
  });

  it('every rule the validator reports reads as plain words (Ajv\'s real messages), on the input it names', () => {
    const Body = Type.Object(
      {
        name: Type.String({ minLength: 1, maxLength: 5, pattern: '^[a-z]+$' }),
        url: Type.Optional(Type.String({ format: 'uri' })),
        email: Type.Optional(Type.String({ format: 'email' })),
        days: Type.Optional(Type.Integer({ minimum: 1, maximum: 90 })),
        kind: Type.Optional(Type.Union([Type.Literal('a'), Type.Literal('b')])),
        tags: Type.Optional(Type.Array(Type.String(), { minItems: 1, maxItems: 2 })),
        on: Type.Optional(Type.Boolean()),
      },
      { additionalProperties: false },
    );
    const cases: Array<[unknown, string, string]> = [
      [{ name: '' }, 'name', 'Must not be empty.'],
      [{ name: 'abcdefgh' }, 'name', 'Must be at most 5 characters long.'],
      [{ name: 'AB' }, 'name', 'Has characters that are not allowed here.'],
      [{ name: 'ab', url: 'not a url' }, 'url', 'Must be a full URL, such as https://example.com.'],
      [{ name: 'ab', email: 'nobody' }, 'email', 'Must be an email address.'],
      [{ name: 'ab', days: 0 }, 'days', 'Must be 1 or more.'],
      [{ name: 'ab', days: 91 }, 'days', 'Must be 90 or less.'],
      [{ name: 'ab', days: 1.5 }, 'days', 'Must be a whole number.'],
      [{ name: 'ab', days: '3' }, 'days', 'Must be a whole number.'],
      [{ name: 'ab', tags: [] }, 'tags', 'Give at least one.'],
      [{ name: 'ab', tags: ['a', 'b', 'c'] }, 'tags', 'Give at most 2.'],
      [{ name: 'ab', on: 'yes' }, 'on', 'Must be yes or no.'],
      [{ name: 'ab', tags: ['\u0000'] }, 'tags.0', 'Has characters that cannot be stored (a NUL character or broken Unicode).'],
      [{}, 'name', 'Required.'],
    ];
    for (const [body, field, message] of cases) {
      const r = refusalOf(schema400(Body, body));
      expect([r.field, r.message], JSON.stringify(body)).toEqual([field, message]);
      expect(r.full.toLowerCase()).toContain(message.toLowerCase().replace(/\.$/, ''));
      expect(r.full).not.toMatch(/body\/|must be >=|must NOT/);
    }
    // A choice among literals, and a property the schema does not know: words, not Ajv's.
    expect(refusalOf(schema400(Body, { name: 'ab', kind: 'c' })).message).not.toMatch(/^Must match|schema/);
    expect(refusalOf(schema400(Body, { name: 'ab', extra: 1 })).message).toBe('Has a setting the service does not know.');
  });

  it('a query or path refusal names its parameter; a required property of a nested object its own path', () => {
    expect(refusalOf({ status: 400, code: 'validation_failed', message: 'querystring/limit must be <= 500' })).toMatchObject({ field: 'limit', message: 'Must be 500 or less.' });
    expect(refusalOf({ status: 400, code: 'validation_failed', message: "body/settings must have required property 'egress'" })).toMatchObject({ field: 'settings.egress', message: 'Required.' });
  });

  it('a service\'s refusal: the input from details.field, the message without the field it opens with', () => {
    expect(refusalOf({ status: 400, code: 'bad_request', message: 'days: at most 90', details: { field: 'days' } })).toEqual({ field: 'days', message: 'At most 90.', full: 'Days: at most 90.' });
    expect(refusalOf({ status: 400, code: 'bad_request', message: 'settings.egress.allow[0]: not a host name', details: { field: 'settings.egress.allow[0]' } })).toMatchObject({ field: 'settings.egress.allow.0', message: 'Not a host name.' });
    expect(refusalOf({ status: 400, code: 'bad_request', message: 'settings.egress.allow[1]: "x!" is not a domain name', details: { field: 'settings.egress.allow' } })).toMatchObject({ field: 'settings.egress.allow', message: 'Entry 2: "x!" is not a domain name.' });
    // A name as written keeps its case.
    expect(refusalOf({ status: 400, code: 'bad_request', message: 'webhookUrl must use https' }).full).toBe('webhookUrl must use https.');
    // Without details: the field its message opens with.
    expect(refusalOf({ status: 400, code: 'bad_request', message: 'title must not be empty' })).toEqual({ field: 'title', message: 'Must not be empty.', full: 'Title must not be empty.' });
    // A sentence that does not open with a field: no field.
    expect(refusalOf({ status: 400, code: 'bad_request', message: 'choose a default model first', hint: 'Pick one above.' }).field).toBeUndefined();
    expect(refusalOf({ status: 409, code: 'conflict', message: 'template "x" already exists' })).toEqual({ field: undefined, message: 'Template "x" already exists.', full: 'Template "x" already exists.' });
  });

  it('403 and 404 say what they mean; a network failure says the service cannot be reached', () => {
    expect(refusalOf({ status: 403, code: 'forbidden', message: 'missing permission admin.manage_users' }).full).toBe('Not allowed: missing permission admin.manage_users.');
    expect(refusalOf({ status: 404, code: 'not_found', message: 'no route' }).full).toBe('Not found: it may have been deleted, or it is not yours.');
    expect(refusalOf(new TypeError('Failed to fetch')).full).toBe('The service cannot be reached. Check your connection and try again.');
    expect(refusalOf({ status: 409, code: 'runtime_not_ready', message: 'no runtime configuration has been applied', hint: 'npx aws runtime apply' }).full).toBe('No runtime configuration has been applied. The Sessions screen shows what is left to set up.');
  });

  it('paths and labels', () => {
    expect(fieldPath('body/models/0/id')).toBe('models.0.id');
    expect(fieldPath('models[2].id')).toBe('models.2.id');
    expect(fieldLabel('models.0.inputCostPerMTok')).toBe('models 1 input cost per mtok');
    expect(fieldLabel('public_url')).toBe('public url');
    expect(plainRule('must be >= 0')).toBe('Must be 0 or more.');
    expect(plainRule('something else entirely')).toBe('Something else entirely.');
    expect(belongsTo('models.0.id', 'models.0.id')).toBe(true);
    expect(belongsTo('models.0.id', 'models.0')).toBe(true);
    expect(belongsTo('models.0.id', 'models[0]')).toBe(true);
    expect(belongsTo('models.10.id', 'models.1')).toBe(false);
    expect(belongsTo(undefined, 'name')).toBe(false);
  });
});
