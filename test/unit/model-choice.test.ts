import { describe, expect, it } from 'vitest';
import { checkModelChoice, effectiveModel, modelCatalog } from '../../src/core/providers/model-choice-fns.js';
import type { ProviderRow } from '../../src/core/providers/providers.repo.js';
import { completePermissions } from '../../src/core/rbac/rbac.schemas.js';
import { forkCut } from '../../src/core/sessions/fork-fns.js';
import { emptyPermissions, grantsBeyond, modelAllowed, systemRolePermissions, unionPermissions, type RbacPermissions } from '../../src/kernel/permissions.js';
import { maskPermissions } from '../../src/core/tokens/token-fns.js';
import { clientProperties } from '../../src/core/runtime/event-mapper.js';
import { modelRefOf, runtimeProviderId } from '../../src/core/runtime/runtime-ids.js';

const withModels = (allowed: string[] | '*'): RbacPermissions => ({ ...emptyPermissions(), models: { allowed } });
const provider = (name: string, ids: string[], enabled = true): ProviderRow => ({
  id: name, tenantId: 't', name, kind: 'openai-compatible', baseUrl: 'http://x', apiKeySealed: null, models: ids.map((id) => ({ id })), enabled, createdAt: new Date(0), updatedAt: new Date(0),
});
const served = { providers: [provider('main', ['small', 'big']), provider('off', ['x'], false), provider('late', ['y'])], applied: ['main', 'off'] };

describe('model choice rules', () => {
  it('takes the turn\'s model over the session\'s, over the template\'s, over the tenant default', () => {
    expect(effectiveModel({ turn: 'a/1', session: 'a/2', template: 'a/3' }, 'a/4')).toEqual({ ref: 'a/1', source: 'turn' });
    expect(effectiveModel({ turn: null, session: 'a/2', template: 'a/3' }, 'a/4')).toEqual({ ref: 'a/2', source: 'session' });
    expect(effectiveModel({ session: '', template: 'a/3' }, 'a/4')).toEqual({ ref: 'a/3', source: 'template' });
    expect(effectiveModel({}, 'a/4')).toEqual({ ref: 'a/4', source: 'default' });
    expect(effectiveModel({}, null)).toBeNull();
  });

  it('allows a model listed, its provider listed as "<provider>/*", or every model; nothing else', () => {
    expect(modelAllowed(withModels('*'), 'main/big')).toBe(true);
    expect(modelAllowed(withModels(['*']), 'main/big')).toBe(true);
    expect(modelAllowed(withModels(['main/big']), 'main/big')).toBe(true);
    expect(modelAllowed(withModels(['main/*']), 'main/org/deep')).toBe(true);
    expect(modelAllowed(withModels(['main/small']), 'main/big')).toBe(false);
    expect(modelAllowed(withModels(['mai/*']), 'main/big')).toBe(false);
    expect(modelAllowed(withModels([]), 'main/small')).toBe(false);
    // A document stored before allow-lists existed allows every model.
    const { models: _m, ...old } = emptyPermissions();
    expect(modelAllowed(old as RbacPermissions, 'main/big')).toBe(true);
  });

  it('refuses a choice that is unknown (400), not served (409) or not allowed (403), in that order, naming the field', () => {
    const code = (f: () => unknown) => {
      try {
        f();
        return 'ok';
      } catch (err) {
        const e = err as { status: number; code: string; details: { field: string } };
        return `${e.status} ${e.code} ${e.details.field}`;
      }
    };
    const all = withModels('*');
    expect(code(() => checkModelChoice('main/small', served, all))).toBe('ok');
    expect(code(() => checkModelChoice('main/huge', served, all))).toBe('400 model_unknown model');
    expect(code(() => checkModelChoice('ghost/x', served, all))).toBe('400 model_unknown model');
    expect(code(() => checkModelChoice('Main', served, all))).toBe('400 model_unknown model');
    expect(code(() => checkModelChoice('off/x', served, withModels([])))).toBe('409 provider_disabled model');
    expect(code(() => checkModelChoice('late/y', served, all))).toBe('409 provider_disabled model');
    expect(code(() => checkModelChoice('main/big', served, withModels(['main/small'])))).toBe('403 model_not_allowed model');
    expect(checkModelChoice('main/big', served, withModels(['main/*']))).toMatchObject({ modelId: 'big' });
  });

  it('lists the served models a person may choose, the default always; all of them with all', () => {
    const none = withModels([]);
    expect(modelCatalog(served, 'main/small', none).map((m) => m.ref)).toEqual(['main/small']);
    expect(modelCatalog(served, 'main/small', withModels('*')).map((m) => m.ref)).toEqual(['main/small', 'main/big']);
    expect(modelCatalog(served, 'main/small', none, { all: true }).map((m) => [m.ref, m.allowed])).toEqual([['main/small', true], ['main/big', false]]);
  });

  it('unions allow-lists across roles (every model absorbs), and nobody grants a model they may not use', () => {
    expect(unionPermissions([withModels(['a/1']), withModels(['b/2'])]).models).toEqual({ allowed: ['a/1', 'b/2'] });
    expect(unionPermissions([withModels(['a/1']), withModels('*')]).models).toEqual({ allowed: '*' });
    expect(unionPermissions([]).models).toEqual({ allowed: [] });
    const held = { ...systemRolePermissions('owner'), models: { allowed: ['a/*', 'b/2'] } };
    expect(grantsBeyond(withModels(['a/1', 'b/2']), held)).toEqual([]);
    expect(grantsBeyond(withModels(['a/*']), held)).toEqual([]);
    expect(grantsBeyond(withModels(['b/3', 'c/*']), held)).toEqual(['models.allowed:b/3', 'models.allowed:c/*']);
    expect(grantsBeyond(withModels('*'), held)).toEqual(['models.allowed:*']);
    expect(grantsBeyond(withModels('*'), systemRolePermissions('admin'))).toEqual([]);
  });

  it('completes a document without a model list to none beyond the defaults; system roles: every model but the viewer\'s; a token without the sessions scope none', () => {
    expect(completePermissions({}).models).toEqual({ allowed: [] });
    expect(completePermissions({ models: { allowed: ['a/1', '*'] } }).models).toEqual({ allowed: '*' });
    expect(completePermissions({ models: { allowed: [] } }).models).toEqual({ allowed: [] });
    expect(() => completePermissions({ models: { allowed: ['no slash'] } })).toThrow(/models/);
    expect(['owner', 'admin', 'member', 'viewer'].map((r) => systemRolePermissions(r as never).models.allowed)).toEqual(['*', '*', '*', []]);
    expect(maskPermissions(systemRolePermissions('member'), ['memories'], false).models).toEqual({ allowed: [] });
    expect(maskPermissions(systemRolePermissions('member'), ['sessions'], false).models).toEqual({ allowed: '*' });
  });
});

describe('the model an answer names', () => {
  const tenant = '0b6f3c1e-1111-4222-8333-944445555666';
  it('is "<provider>/<model id>" for one of the tenant\'s providers, nothing for another tenant\'s', () => {
    expect(modelRefOf(tenant, { providerID: runtimeProviderId(tenant, 'main'), modelID: 'big' })).toBe('main/big');
    expect(modelRefOf(tenant, { providerID: runtimeProviderId('0b6f3c1e-1111-4222-8333-000000000000', 'main'), modelID: 'big' })).toBeNull();
    expect(modelRefOf(tenant, { providerID: 'openai', modelID: 'gpt' })).toBeNull();
    const ev = { type: 'message.updated' as const, properties: { info: { id: 'msg_1', role: 'assistant', sessionID: 'ses_x', providerID: runtimeProviderId(tenant, 'main'), modelID: 'big' } } };
    expect((clientProperties(ev, 'ours', tenant).info as Record<string, unknown>)).toMatchObject({ model: 'main/big', sessionID: 'ours' });
  });
});

describe('where a branch is cut', () => {
  const m = (id: string, role: string, parentID?: string) => ({ info: { id, role, parentID } });
  const transcript = [m('msg_1', 'user'), m('msg_2', 'assistant', 'msg_1'), m('msg_3', 'assistant', 'msg_1'), m('msg_4', 'user'), m('msg_5', 'assistant', 'msg_4')];

  it('keeps the chosen message and the rest of its answer, and names the first message left out', () => {
    expect(forkCut(transcript, 'msg_2')).toEqual({ before: 'msg_4', kept: 3 });
    expect(forkCut(transcript, 'msg_3')).toEqual({ before: 'msg_4', kept: 3 });
    expect(forkCut(transcript, 'msg_1')).toEqual({ before: 'msg_2', kept: 1 });
    expect(forkCut(transcript, 'msg_5')).toEqual({ before: null, kept: 5 });
    expect(forkCut(transcript, 'msg_9')).toBeNull();
  });
});
