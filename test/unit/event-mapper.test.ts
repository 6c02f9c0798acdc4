import { describe, expect, it } from 'vitest';
import { clientProperties, FORWARDED_TYPES, mapRuntimeEvent } from '../../src/core/runtime/event-mapper.js';
import type { RuntimeEvent } from '../../src/core/runtime/runtime-events.js';

// Payloads as opencode 1.18.33 sends them on /global/event (shapes from its SDK's types.gen.d.ts and
// from what the real-runtime suites see).
const SES = 'ses_0a1b2c3d4e5fAbCdEfGhIjKlMn';
const DIR = '/var/lib/agentws/workspaces/t1/u1';
const ev = (type: string, properties: Record<string, any>, id = 'evt_01HZZZ0000000001'): RuntimeEvent => ({ directory: DIR, payload: { id, type, properties } });

const assistantInfo = (over: Record<string, any> = {}) => ({
  id: 'msg_a2',
  sessionID: SES,
  role: 'assistant',
  time: { created: 1_760_000_000_000, completed: 1_760_000_002_500 },
  parentID: 'msg_u1',
  modelID: 'fake-model',
  providerID: 'scripted',
  mode: 'build',
  agent: 'build',
  path: { cwd: DIR, root: DIR },
  cost: 0.006,
  tokens: { total: 1500, input: 1000, output: 500, reasoning: 0, cache: { read: 0, write: 0 } },
  finish: 'stop',
  ...over,
});

const toolPart = (state: Record<string, any>, over: Record<string, any> = {}) => ({
  id: 'prt_t1',
  sessionID: SES,
  messageID: 'msg_a2',
  type: 'tool',
  callID: 'call_abc',
  tool: 'bash',
  state,
  ...over,
});

describe('event mapper: what is forwarded', () => {
  it('drops types clients do not see and events without a session', () => {
    for (const type of ['server.connected', 'server.heartbeat', 'session.created', 'session.updated', 'session.diff', 'file.edited', 'lsp.updated']) {
      expect(mapRuntimeEvent(ev(type, { sessionID: SES, info: { id: SES } }))).toBeNull();
    }
    expect(mapRuntimeEvent(ev('session.error', { error: { name: 'UnknownError', data: { message: 'boom' } } }))).toBeNull();
    expect(FORWARDED_TYPES).toHaveLength(11);
  });

  it('finds the session at the top, in the message, or in the part', () => {
    const info = { id: 'msg_u1', sessionID: SES, role: 'user', time: { created: 1 } };
    expect(mapRuntimeEvent(ev('message.updated', { info }))).toMatchObject({ kind: 'forward', upstreamSessionId: SES });
    expect(mapRuntimeEvent(ev('message.part.updated', { part: { id: 'prt_1', sessionID: SES, messageID: 'msg_u1', type: 'text', text: 'hi' } }))).toMatchObject({ upstreamSessionId: SES });
    expect(mapRuntimeEvent(ev('session.compacted', { sessionID: SES }))).toEqual({ kind: 'forward', upstreamSessionId: SES, eventId: 'evt_01HZZZ0000000001', type: 'session.compacted', properties: { sessionID: SES } });
  });

  it('forwards deltas and removals unchanged, a text delta read as one; keeps no event id the runtime did not send', () => {
    const delta = { sessionID: SES, messageID: 'msg_a2', partID: 'prt_2', field: 'text', delta: 'Hello from' };
    expect(mapRuntimeEvent(ev('message.part.delta', delta))).toEqual({
      kind: 'textDelta', messageId: 'msg_a2', partId: 'prt_2', delta: 'Hello from', upstreamSessionId: SES, eventId: 'evt_01HZZZ0000000001', type: 'message.part.delta', properties: delta,
    });
    // A delta of another field (or a malformed one) is only forwarded.
    const other = { sessionID: SES, messageID: 'msg_a2', partID: 'prt_2', field: 'metadata', delta: 'x' };
    expect(mapRuntimeEvent(ev('message.part.delta', other))).toMatchObject({ kind: 'forward', properties: other });
    expect(mapRuntimeEvent(ev('message.part.delta', { sessionID: SES, field: 'text', delta: 'x' }))).toMatchObject({ kind: 'forward' });
    const removed = mapRuntimeEvent({ payload: { type: 'message.part.removed', properties: { sessionID: SES, messageID: 'msg_a2', partID: 'prt_2' } } })!;
    expect(removed).toMatchObject({ kind: 'forward', type: 'message.part.removed' });
    expect('eventId' in removed).toBe(false);
    expect(mapRuntimeEvent(ev('message.removed', { sessionID: SES, messageID: 'msg_a2' }))).toMatchObject({ kind: 'forward', properties: { messageID: 'msg_a2' } });
    const err = { sessionID: SES, error: { name: 'APIError', data: { message: 'rate limited', isRetryable: false } } };
    expect(mapRuntimeEvent(ev('session.error', err))).toMatchObject({ kind: 'forward', properties: err });
  });

  it('reads a text part\'s text as it stands (what a turn cut mid-answer had streamed); other parts are forwarded', () => {
    const part = { id: 'prt_1', sessionID: SES, messageID: 'msg_a1', type: 'text', text: 'So far' };
    expect(mapRuntimeEvent(ev('message.part.updated', { part }))).toMatchObject({ kind: 'textPart', messageId: 'msg_a1', partId: 'prt_1', text: 'So far', properties: { part } });
    expect(mapRuntimeEvent(ev('message.part.updated', { part: { ...part, text: undefined } }))).toMatchObject({ kind: 'textPart', text: '' });
    expect(mapRuntimeEvent(ev('message.part.updated', { part: { ...part, type: 'reasoning' } }))).toMatchObject({ kind: 'forward' });
  });

  it('maps session.status: busy and retry are running (retry says why), idle stays idle', () => {
    const status = (st: Record<string, any> | undefined) => mapRuntimeEvent(ev('session.status', { sessionID: SES, status: st }))!.properties.status;
    expect(status({ type: 'busy' })).toEqual({ type: 'running' });
    expect(status({ type: 'idle' })).toEqual({ type: 'idle' });
    expect(status({ type: 'retry', attempt: 2, message: 'Provider is overloaded', next: 1_760_000_010_000, action: { reason: 'x' } })).toEqual({
      type: 'running',
      retry: { attempt: 2, message: 'Provider is overloaded', next: 1_760_000_010_000 },
    });
    expect(status(undefined)).toEqual({ type: 'running' });
  });

  it('turns session.idle into turnIdle', () => {
    expect(mapRuntimeEvent(ev('session.idle', { sessionID: SES }))).toEqual({ kind: 'turnIdle', upstreamSessionId: SES, eventId: 'evt_01HZZZ0000000001', type: 'session.idle', properties: { sessionID: SES } });
  });
});

describe('event mapper: messages', () => {
  it('strips the server paths from a message and leaves user messages as plain forwards', () => {
    const user = mapRuntimeEvent(ev('message.updated', { sessionID: SES, info: { id: 'msg_u1', sessionID: SES, role: 'user', time: { created: 1 }, agent: 'build', model: { providerID: 'scripted', modelID: 'fake-model' } } }))!;
    expect(user.kind).toBe('forward');
    const a = mapRuntimeEvent(ev('message.updated', { sessionID: SES, info: assistantInfo() }))!;
    expect(a.properties.info).not.toHaveProperty('path');
    expect(a.properties.info).toMatchObject({ id: 'msg_a2', role: 'assistant', cost: 0.006 });
  });

  it('reads a completed assistant message: ids, model, tokens, cost', () => {
    expect(mapRuntimeEvent(ev('message.updated', { sessionID: SES, info: assistantInfo() }))).toMatchObject({
      kind: 'assistantMessage',
      messageId: 'msg_a2',
      parentId: 'msg_u1',
      providerId: 'scripted',
      modelId: 'fake-model',
      tokens: { total: 1500, input: 1000, output: 500, reasoning: 0, cache: { read: 0, write: 0 } },
      cost: 0.006,
      completed: true,
    });
  });

  it('an assistant message still streaming is not completed; missing fields read as unknown', () => {
    const time = { created: 1_760_000_000_000 };
    expect(mapRuntimeEvent(ev('message.updated', { sessionID: SES, info: assistantInfo({ time, cost: 0 }) }))).toMatchObject({ kind: 'assistantMessage', completed: false, cost: 0 });
    const bare = mapRuntimeEvent(ev('message.updated', { info: { id: 'msg_a3', sessionID: SES, role: 'assistant', time } }))!;
    expect(bare).toMatchObject({ kind: 'assistantMessage', messageId: 'msg_a3', parentId: null, providerId: '', modelId: '', tokens: null, cost: null, completed: false });
  });
});

describe('event mapper: tool parts', () => {
  const part = (p: Record<string, any>) => mapRuntimeEvent(ev('message.part.updated', { sessionID: SES, part: p, time: 1_760_000_001_000 }));

  it('a running or pending tool, and other part types, are only forwarded', () => {
    expect(part(toolPart({ status: 'pending', input: {}, raw: '' }))!.kind).toBe('forward');
    expect(part(toolPart({ status: 'running', input: { command: 'ls' }, time: { start: 1 } }))!.kind).toBe('forward');
    expect(part({ id: 'prt_s', sessionID: SES, messageID: 'msg_a2', type: 'step-finish', reason: 'tool-calls', cost: 0, tokens: { input: 1, output: 1, reasoning: 0, cache: { read: 0, write: 0 } } })!.kind).toBe('forward');
  });

  it('a completed tool: name, call id, duration, title', () => {
    const done = part(toolPart({ status: 'completed', input: { command: 'echo ok', description: 'say ok' }, output: 'ok\n', title: 'say ok', metadata: { exit: 0 }, time: { start: 1_760_000_000_100, end: 1_760_000_000_342.6 } }));
    expect(done).toMatchObject({ kind: 'toolFinished', partId: 'prt_t1', tool: 'bash', callId: 'call_abc', status: 'completed', durationMs: 243, title: 'say ok' });
    expect(done!.properties.part).toMatchObject({ id: 'prt_t1', tool: 'bash', state: { status: 'completed' } });
  });

  it('a failed tool has no title; a missing start time gives no duration', () => {
    const failed = part(toolPart({ status: 'error', input: { filePath: 'x' }, error: 'The user rejected permission to use this specific tool call.', time: { start: 5, end: 9 } }, { tool: 'read' }));
    expect(failed).toMatchObject({ kind: 'toolFinished', tool: 'read', status: 'error', durationMs: 4 });
    expect(failed).not.toHaveProperty('title');
    expect(part(toolPart({ status: 'error', input: {}, error: 'x', time: { end: 9 } }))).toMatchObject({ durationMs: null });
    // A clock going backwards never gives a negative duration.
    expect(part(toolPart({ status: 'completed', input: {}, output: '', title: '', metadata: {}, time: { start: 10, end: 4 } }))).toMatchObject({ durationMs: 0 });
  });

  it('the runtime\'s `invalid` stand-in is an invalid call of the tool the model asked for', () => {
    const invalid = toolPart({ status: 'completed', input: { tool: 'bash', error: 'Model tried to call unavailable tool \'bash\'.' }, output: 'The arguments provided to the tool are invalid', title: 'Invalid Tool', metadata: {}, time: { start: 1, end: 2 } }, { tool: 'invalid', id: 'prt_inv' });
    expect(part(invalid)).toMatchObject({ kind: 'invalidToolCall', partId: 'prt_inv', requestedTool: 'bash' });
    expect(part({ ...invalid, state: { ...invalid.state, input: {} } })).toMatchObject({ kind: 'invalidToolCall', requestedTool: null });
  });
});

describe('event mapper: permissions', () => {
  it('permission.asked: request id, permission, patterns', () => {
    const asked = { id: 'per_9f8e7d', sessionID: SES, permission: 'bash', patterns: ['nice > ran-once.txt'], metadata: {}, always: ['nice *'], tool: { messageID: 'msg_a2', callID: 'call_abc' } };
    expect(mapRuntimeEvent(ev('permission.asked', asked))).toEqual({ kind: 'permissionAsked', upstreamSessionId: SES, eventId: 'evt_01HZZZ0000000001', type: 'permission.asked', properties: asked, requestId: 'per_9f8e7d', permission: 'bash', patterns: ['nice > ran-once.txt'] });
    expect(mapRuntimeEvent(ev('permission.asked', { id: 'per_2', sessionID: SES, permission: 'doom_loop', metadata: {}, always: [] }))).toMatchObject({ permission: 'doom_loop', patterns: [] });
  });

  it('permission.replied: the request it answers; without one it is only forwarded', () => {
    expect(mapRuntimeEvent(ev('permission.replied', { sessionID: SES, requestID: 'per_9f8e7d', reply: 'always' }))).toMatchObject({ kind: 'permissionReplied', requestId: 'per_9f8e7d' });
    expect(mapRuntimeEvent(ev('permission.replied', { sessionID: SES, reply: 'once' }))).toMatchObject({ kind: 'forward', type: 'permission.replied' });
  });
});

describe('clientProperties', () => {
  const OURS = '5b0f1c52-8a53-4d2e-9a8c-2f4f5d7f1e01';

  it('puts our session id at the top of every event', () => {
    for (const [type, props] of [
      ['session.idle', { sessionID: SES }],
      ['message.part.delta', { sessionID: SES, messageID: 'm', partID: 'p', field: 'text', delta: 'x' }],
      ['permission.asked', { id: 'per_1', sessionID: SES, permission: 'bash', patterns: [], metadata: {}, always: [] }],
    ] as const) {
      expect(clientProperties(mapRuntimeEvent(ev(type, props))!, OURS)).toEqual({ ...props, sessionID: OURS });
    }
  });

  it('and in the message of a message update, and the part of a part update', () => {
    const msg = clientProperties(mapRuntimeEvent(ev('message.updated', { sessionID: SES, info: assistantInfo() }))!, OURS);
    expect(msg).toMatchObject({ sessionID: OURS, info: { id: 'msg_a2', sessionID: OURS } });
    expect(msg.info).not.toHaveProperty('path');
    const p = clientProperties(mapRuntimeEvent(ev('message.part.updated', { sessionID: SES, part: toolPart({ status: 'running', input: {}, time: { start: 1 } }), time: 2 }))!, OURS);
    expect(p).toMatchObject({ sessionID: OURS, time: 2, part: { id: 'prt_t1', sessionID: OURS, state: { status: 'running' } } });
    // Nothing of the runtime's session id is left.
    expect(JSON.stringify(msg) + JSON.stringify(p)).not.toContain(SES);
  });

  it('does not change the mapped event', () => {
    const mapped = mapRuntimeEvent(ev('message.updated', { sessionID: SES, info: assistantInfo() }))!;
    clientProperties(mapped, OURS);
    expect((mapped.properties.info as any).sessionID).toBe(SES);
    expect(mapped.properties.sessionID).toBe(SES);
  });
});
