import { join } from 'node:path';

/**
 * Where people's workspaces live in the data dir: `workspaces/<tenantId>/<userId>`. One rule for the
 * control plane (sessions, tenants, privacy, backup) and the hosts that run agents (runtime host,
 * runner), which may import only src/lib: a path computed two ways would put a user's files in one
 * place and look for them in another.
 */
export const WORKSPACES_DIR = 'workspaces';

/** A person's workspace relative to the data dir (what a runner's file transfer names). */
export const workspacePath = (o: { tenantId: string; userId: string }) => join(WORKSPACES_DIR, o.tenantId, o.userId);

/** The directory holding one tenant's workspaces. */
export const tenantWorkspacesDir = (dataDir: string, tenantId: string) => join(dataDir, WORKSPACES_DIR, tenantId);

/** A person's workspace: the agent's working directory, mounted at the same path in their sandbox. */
export const workspaceDir = (dataDir: string, o: { tenantId: string; userId: string }) => join(dataDir, workspacePath(o));
