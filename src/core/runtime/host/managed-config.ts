import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Where the service's configuration of a runtime lives: a file the host writes, which the runtime reads as
 * opencode's managed configuration, read-only inside the sandbox at /etc/opencode (sandbox.ts).
 *
 * Why not opencode's own `PATCH /global/config`: that writes ~/.config/opencode/opencode.json, a file in
 * the agent's home that the agent can write too (opencode runs as the agent's user). Keys the service does
 * not set there (plugin, instructions, agent, command, mcp servers, provider options...) would persist
 * and apply at the runtime's next reload or start, and opencode merges its sources (instructions and
 * plugins are even joined), so no value the service sets can take a planted key out again. Now every
 * directory opencode reads configuration from is read-only inside (see sandbox.ts), and the managed one,
 * read last (highest precedence) and afresh at each reload, is the host's. Not covered: an account
 * recorded in opencode's session database (writable) makes it fetch configuration from the account's
 * server at each reload; its keys merge under the managed file's (docs/security/README.md).
 *
 * Facts this relies on (opencode 1.18.33): the managed configuration directory is /etc/opencode on Linux
 * (OPENCODE_TEST_MANAGED_CONFIG_DIR names another: how an unsandboxed runtime is given its host path);
 * its opencode.json is read whenever a workspace's instance is built, while the global configuration is
 * read once per process; `POST /global/dispose` drops every instance, so the next request builds them
 * again from the files.
 */

/** One user's runtime's own files on the host: home/, run/, tmp/, etc/, managed/. */
export const runtimeRoot = (dataDir: string, userId: string) => join(dataDir, 'runtimes', userId);

/** The host directory holding a runtime's managed configuration (opencode.json). */
export const managedConfigDir = (root: string) => join(root, 'managed');

/**
 * The route, under a runtime's path on the runner channel (`/rt/<user>`), by which the control plane
 * writes a runner-hosted runtime's configuration: the runner answers it itself (runner-agent.ts); it
 * never reaches the runtime.
 */
export const MANAGED_CONFIG_ROUTE = '/agentws/managed-config';

/**
 * The key of the configuration that is not opencode's: the sandbox's git config (git-fns.ts
 * sandboxGitConfig), written beside opencode.json as `gitconfig`, which git in the sandbox reads as its
 * system config (GIT_CONFIG_SYSTEM, runtime-launcher.ts). One payload, so a runner host writes it too.
 */
export const MANAGED_GITCONFIG_KEY = 'agentws:gitconfig';
/** The git config's file name in the managed directory (/etc/opencode/gitconfig inside the sandbox). */
export const MANAGED_GITCONFIG_FILE = 'gitconfig';

/**
 * Writes the configuration whole, by rename (a runtime reading it meanwhile sees the old file or the new
 * one), and the git config beside it. Returns whether either changed.
 */
export function writeManagedConfig(dir: string, config: Record<string, unknown>): boolean {
  const { [MANAGED_GITCONFIG_KEY]: git, ...opencode } = config;
  // $schema: opencode adds it to a file that lacks it, by writing the file (read-only inside).
  const text = `${JSON.stringify({ $schema: 'https://opencode.ai/config.json', ...opencode }, null, 2)}\n`;
  const a = writeWhole(dir, 'opencode.json', text);
  // No git host: no file (git reads none); a file written before is emptied.
  const b = writeWhole(dir, MANAGED_GITCONFIG_FILE, typeof git === 'string' ? git : '');
  return a || b;
}

function writeWhole(dir: string, name: string, text: string): boolean {
  const file = join(dir, name);
  try {
    if (readFileSync(file, 'utf8') === text) return false;
  } catch {
    // not written yet: nothing to write when there is nothing in it
    if (!text) return false;
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = join(dir, `.${name}.${process.pid}.tmp`);
  // Readable by the sandbox's user like opencode.json (the directory is bound read-only).
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, file);
  return true;
}
