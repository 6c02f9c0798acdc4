import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { ConfigError } from '../../src/kernel/errors.js';
import { ASKABLE_TOOL_NAMES, permissionOfTool } from '../../src/core/runtime/runtime-tools.js';
import { createRuntimeService } from '../../src/core/runtime/runtime.service.js';

const SECRETS = { AGENTWS_JWT_SECRET: 'j'.repeat(43), AGENTWS_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64url') };

describe('tools that can ask (opencode 1.18.33)', () => {
  it('maps each configurable name to the permission the runtime asks under', () => {
    expect(permissionOfTool('bash')).toBe('bash');
    expect(permissionOfTool('edit')).toBe('edit');
    for (const t of ['write', 'patch', 'multiedit', 'apply_patch']) expect(permissionOfTool(t)).toBe('edit');
    expect(permissionOfTool('external_directory')).toBe('external_directory');
    // Names no tool asks under would never ask.
    for (const t of ['list', 'question', 'codesearch', 'nope']) expect(permissionOfTool(t)).toBeNull();
    expect(ASKABLE_TOOL_NAMES).toEqual(expect.arrayContaining(['bash', 'edit', 'write', 'read', 'glob', 'grep', 'webfetch', 'task', 'skill', 'todowrite', 'external_directory', 'doom_loop']));
  });

  it('AGENTWS_RUNTIME_ASK_TOOLS refuses a name that would never ask, naming the ones that do', () => {
    expect(loadConfig({ env: { ...SECRETS, AGENTWS_RUNTIME_ASK_TOOLS: 'bash, write,webfetch' } }).runtime.askTools).toEqual(['bash', 'write', 'webfetch']);
    // The configuration reads the list; the runtime service, which knows the runtime's tools, refuses it
    // as it is made (at start-up), as a configuration problem naming the variable.
    const { askTools } = loadConfig({ env: { ...SECRETS, AGENTWS_RUNTIME_ASK_TOOLS: 'bash,list,web-fetch' } }).runtime;
    let problems: Array<{ variable: string; message: string }> = [];
    try {
      createRuntimeService({ askTools } as unknown as Parameters<typeof createRuntimeService>[0]);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      problems = (err as ConfigError).problems;
    }
    expect(problems.map((p) => p.message)).toEqual([
      expect.stringMatching(/^"list" is not a runtime tool that can ask \(one of bash, edit, .*\)$/),
      expect.stringMatching(/^"web-fetch" is not a runtime tool that can ask/),
    ]);
    expect(problems.every((p) => p.variable === 'AGENTWS_RUNTIME_ASK_TOOLS')).toBe(true);
  });
});
