/**
 * Which of the runtime's tools can ask the session owner before they run (opencode 1.18.33). A tool
 * asks under a permission name, which is not always its own: write, patch, multiedit and apply_patch
 * ask as `edit`. `external_directory` is asked by any tool reaching outside the workspace (denied unless
 * configured to ask), `doom_loop` when the model repeats one call three times (asks by default).
 */
const ASKABLE_PERMISSIONS = ['bash', 'edit', 'read', 'glob', 'grep', 'task', 'skill', 'todowrite', 'webfetch', 'websearch', 'lsp', 'external_directory', 'doom_loop'] as const;
const ASKS_AS: Record<string, (typeof ASKABLE_PERMISSIONS)[number]> = { write: 'edit', patch: 'edit', multiedit: 'edit', apply_patch: 'edit' };

/** Every name AGENTWS_RUNTIME_ASK_TOOLS accepts. */
export const ASKABLE_TOOL_NAMES: readonly string[] = [...ASKABLE_PERMISSIONS, ...Object.keys(ASKS_AS)];

/** The permission a configured tool name asks under, or null for a name no tool asks under. */
export function permissionOfTool(tool: string): string | null {
  if ((ASKABLE_PERMISSIONS as readonly string[]).includes(tool)) return tool;
  return ASKS_AS[tool] ?? null;
}

/**
 * The name the model (and the runtime's tool switches and tool parts) know an MCP server's tool by:
 * opencode 1.18 prefixes it with the server's configured name, both with characters outside
 * `[A-Za-z0-9_-]` replaced by `_`.
 */
export function mcpToolName(server: string, tool: string): string {
  const clean = (s: string) => s.replace(/[^a-zA-Z0-9_-]/g, '_');
  return `${clean(server)}_${clean(tool)}`;
}
