import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { seedPeople } from '../helpers/runtime.js';

/**
 * Choosing models without a runtime: the role allow-list of models (models.allowed), GET /v1/models, a session's
 * and a prompt's model and their refusals (unknown, provider disabled or not applied, not allowed), and a
 * branch of someone else's session. Prompts are only accepted here (no worker sends them).
 */
describe('sessions: the models a person may choose', () => {
  let t: TestApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;
  let memberRole: string;

  const provider = (name: string, models: string[], enabled = true) =>
    api(t, 'POST', '/v1/admin/providers', { token: people.tokens.owner, body: { name, kind: 'openai-compatible', baseUrl: 'http://127.0.0.1:9/v1', models: models.map((id) => ({ id })), enabled } });
  const setMemberModels = (allowed: string[] | '*') => api(t, 'PATCH', `/v1/admin/roles/${memberRole}`, { token: people.tokens.owner, body: { permissions: { models: { allowed } } } });
  const newSession = (token: string, body: Record<string, unknown> = {}) => api(t, 'POST', '/v1/sessions', { token, body: { title: 'models', ...body } });

  beforeAll(async () => {
    t = await startTestApp();
    people = await seedPeople(t, 'acme');
    expect((await provider('main', ['small', 'big'])).status).toBe(201);
    expect((await provider('off', ['x'], false)).status).toBe(201);
    expect((await api(t, 'POST', '/v1/admin/runtime/apply', { token: people.tokens.owner, body: { defaultModel: 'main/small' } })).status).toBe(200);
    // Enabled after the apply: not served until the next one.
    expect((await provider('late', ['y'])).status).toBe(201);
    memberRole = (await api(t, 'GET', '/v1/admin/roles', { token: people.tokens.owner })).json.roles.find((r: any) => r.name === 'member').id;
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  it('lists the served models the role allows, the default always, and every served model with all=true for whoever manages roles', async () => {
    const { tokens } = people;
    const all = await api(t, 'GET', '/v1/models', { token: tokens.member });
    expect(all.status).toBe(200);
    expect(all.json).toEqual({
      defaultModel: 'main/small',
      models: [
        { ref: 'main/small', provider: 'main', id: 'small', name: 'small', default: true, contextLimit: null, allowed: true },
        { ref: 'main/big', provider: 'main', id: 'big', name: 'big', default: false, contextLimit: null, allowed: true },
      ],
    });
    expect((await setMemberModels([])).status).toBe(200);
    try {
      expect((await api(t, 'GET', '/v1/models', { token: tokens.member })).json.models.map((m: any) => m.ref)).toEqual(['main/small']);
      const forbidden = await api(t, 'GET', '/v1/models?all=true', { token: tokens.member });
      expect(forbidden.status).toBe(403);
      // The owner sees what a role could be given; owner's own choice is every model.
      expect((await api(t, 'GET', '/v1/models?all=true', { token: tokens.owner })).json.models.map((m: any) => [m.ref, m.allowed])).toEqual([['main/small', true], ['main/big', true]]);
    } finally {
      await setMemberModels('*');
    }
    expect((await api(t, 'GET', '/v1/models', { token: tokens.viewer })).status).toBe(200);
  });

  it('refuses a model for a session or a prompt that is unknown, whose provider does not serve, or that the role may not use, naming the field', async () => {
    const { tokens } = people;
    const unknown = await newSession(tokens.member, { model: 'main/huge' });
    expect(unknown.status).toBe(400);
    expect(unknown.json).toMatchObject({ error: 'model_unknown', details: { field: 'model' } });
    expect((await newSession(tokens.member, { model: 'nobody/x' })).json.error).toBe('model_unknown');
    expect((await newSession(tokens.member, { model: 'no slash' })).json).toMatchObject({ error: 'model_unknown', details: { field: 'model' } });
    const disabled = await newSession(tokens.member, { model: 'off/x' });
    expect(disabled.status).toBe(409);
    expect(disabled.json).toMatchObject({ error: 'provider_disabled', details: { field: 'model', provider: 'off' } });
    expect(disabled.json.message).toContain('is disabled');
    const late = await newSession(tokens.member, { model: 'late/y' });
    expect(late.json).toMatchObject({ error: 'provider_disabled' });
    expect(late.json.message).toContain('not applied');

    expect((await setMemberModels(['main/small'])).status).toBe(200);
    try {
      const refused = await newSession(tokens.member, { model: 'main/big' });
      expect(refused.status).toBe(403);
      expect(refused.json).toMatchObject({ error: 'model_not_allowed', details: { field: 'model', model: 'main/big' } });
      // The prompt's model is checked the same way, before any turn is queued.
      const id = (await newSession(tokens.member)).json.sessionId as string;
      const prompt = await api(t, 'POST', `/v1/sessions/${id}/prompt`, { token: tokens.member, body: { text: 'hi', model: 'main/big' } });
      expect(prompt.status).toBe(403);
      expect(prompt.json.error).toBe('model_not_allowed');
      expect((await t.opened.db.query(`select count(*)::int as n from agent_turns where session_id = $1`, [id])).rows[0].n).toBe(0);
      expect((await api(t, 'POST', `/v1/sessions/${id}/prompt`, { token: tokens.member, body: { text: 'hi', model: 'main/small' } })).status).toBe(202);
      const turn = (await t.opened.db.query(`select model from agent_turns where session_id = $1`, [id])).rows;
      expect(turn).toEqual([{ model: 'main/small' }]);
      // "<provider>/*" allows every model of that provider.
      expect((await setMemberModels(['main/*'])).status).toBe(200);
      expect((await newSession(tokens.member, { model: 'main/big' })).status).toBe(201);
    } finally {
      await setMemberModels('*');
    }
  });

  it("keeps a session's model, refuses a prompt when the role lost it since, and always allows the templates' and the default model", async () => {
    const { tokens } = people;
    const id = (await newSession(tokens.member, { model: 'main/big' })).json.sessionId as string;
    expect((await api(t, 'GET', `/v1/sessions/${id}/model`, { token: tokens.member })).json).toEqual({
      sessionId: id,
      model: 'main/big',
      templateModel: null,
      defaultModel: 'main/small',
      effective: { model: 'main/big', source: 'session' },
    });
    expect((await api(t, 'POST', '/v1/admin/templates', { token: tokens.owner, body: { slug: 'big-tpl', name: 'Big', model: 'main/big' } })).status).toBe(201);
    expect((await setMemberModels([])).status).toBe(200);
    try {
      const refused = await api(t, 'POST', `/v1/sessions/${id}/prompt`, { token: tokens.member, body: { text: 'hi' } });
      expect(refused.status).toBe(403);
      expect(refused.json.message).toContain("the session's model");
      // Back to what the admins chose: the default, and a template's model, need no allow-list.
      const put = await api(t, 'PUT', `/v1/sessions/${id}/model`, { token: tokens.member, body: { model: null } });
      expect(put.json.effective).toEqual({ model: 'main/small', source: 'default' });
      expect((await api(t, 'POST', `/v1/sessions/${id}/prompt`, { token: tokens.member, body: { text: 'hi' } })).status).toBe(202);
      const fromTemplate = (await newSession(tokens.member, { template_slug: 'big-tpl' })).json.sessionId as string;
      expect((await api(t, 'GET', `/v1/sessions/${fromTemplate}/model`, { token: tokens.member })).json.effective).toEqual({ model: 'main/big', source: 'template' });
      expect((await api(t, 'POST', `/v1/sessions/${fromTemplate}/prompt`, { token: tokens.member, body: { text: 'hi' } })).status).toBe(202);
      // Choosing it for the session is the person's choice, though: refused.
      expect((await api(t, 'PUT', `/v1/sessions/${fromTemplate}/model`, { token: tokens.member, body: { model: 'main/big' } })).json.error).toBe('model_not_allowed');
    } finally {
      await setMemberModels('*');
    }
    // Audited: the allow-list change named apart, the session's model.
    const audit = async (action: string) => (await t.opened.db.query(`select session_id as "sessionId", details from audit_log where tenant_id = $1 and action = $2`, [people.tenantId, action])).rows;
    expect((await audit('role.update')).map((e) => e.details.models).filter(Boolean)).toContainEqual({ before: '*', after: [] });
    expect((await audit('session.model_set')).some((e) => e.sessionId === id && e.details.model === null && e.details.before === 'main/big')).toBe(true);
  });

  it("answers 404 for another person's session, and refuses whoever may not prompt", async () => {
    const { tokens } = people;
    const id = (await newSession(tokens.member)).json.sessionId as string;
    for (const [method, path, body] of [
      ['GET', `/v1/sessions/${id}/model`, undefined],
      ['PUT', `/v1/sessions/${id}/model`, { model: 'main/big' }],
      ['POST', `/v1/sessions/${id}/fork`, { messageId: 'msg_abc' }],
    ] as const) {
      const r = await api(t, method, path, { token: tokens.owner, body });
      expect(r.status, `${method} ${path}`).toBe(404);
    }
    // Their own session, a message it does not have: 404 naming it.
    const own = await api(t, 'POST', `/v1/sessions/${id}/fork`, { token: tokens.member, body: { messageId: 'msg_abc' } });
    expect(own.status).toBe(404);
    expect(own.json.details).toEqual({ field: 'messageId' });
    // A viewer runs no agent: may not choose a model for a session.
    const viewerSession = await api(t, 'PUT', `/v1/sessions/${id}/model`, { token: tokens.viewer, body: { model: 'main/big' } });
    expect(viewerSession.status).toBe(403);
    expect((await t.opened.db.query(`select chosen_model from agent_sessions where id = $1`, [id])).rows[0].chosen_model).toBeNull();
  });

  it('checks a role document\'s model list: references only, and nobody grants models they may not use', async () => {
    const { tokens } = people;
    const bad = await setMemberModels(['not a ref']);
    expect(bad.status).toBe(400);
    expect(bad.json.message).toContain('models');
    // A custom role without a list: as every missing member, none granted (the defaults stay usable).
    const made = await api(t, 'POST', '/v1/admin/roles', { token: tokens.owner, body: { name: 'plain', permissions: { agents: { create: true } } } });
    expect(made.status).toBe(201);
    expect(made.json.role.permissions.models).toEqual({ allowed: [] });
    const narrow = await api(t, 'POST', '/v1/admin/roles', { token: tokens.owner, body: { name: 'narrow', permissions: { agents: { create: true }, models: { allowed: ['main/small', '*'] } } } });
    expect(narrow.json.role.permissions.models).toEqual({ allowed: '*' });
    // Someone who manages roles but may use one model grants no more than that one.
    const keeper = await api(t, 'POST', '/v1/admin/roles', { token: tokens.owner, body: { name: 'keeper', permissions: { admin: { manage_roles: true }, models: { allowed: ['main/small'] } } } });
    expect(keeper.status).toBe(201);
    const token = await signToken(t, { sub: people.ids.mia, tid: people.tenantId, roles: ['keeper'] });
    const wider = await api(t, 'POST', '/v1/admin/roles', { token, body: { name: 'wider', permissions: { models: { allowed: ['main/small', 'main/big'] } } } });
    expect(wider.status).toBe(403);
    expect(wider.json.details).toMatchObject({ exceeds: ['models.allowed:main/big'] });
    expect((await api(t, 'POST', '/v1/admin/roles', { token, body: { name: 'same', permissions: { models: { allowed: ['main/small'] } } } })).status).toBe(201);
  });
});
