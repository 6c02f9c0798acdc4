/**
 * What a runtime reaches besides the internet, by name: the contract between the runtime's configuration
 * (runtime.service.ts writes these into it) and what answers them next to the agent (the egress proxy's
 * gateway host, on the serve or on a runner host, which passes them to the control plane's LLM gateway,
 * memory server and MCP connectors). Kept here, under the runtime, so that neither side imports the other
 * for them.
 */

/** The virtual host of the model gateway and the memory tools: it never leaves the proxy. */
export const GATEWAY_HOST = 'llm.agentws.internal';
/** The memory tools' MCP endpoint on the gateway host. */
export const MEMORY_MCP_PATH = '/mcp/memory';
/** The memory tools' MCP server name in the runtime's configuration (tool names are `memory_<tool>`). */
export const MEMORY_MCP_SERVER = 'memory';
/** Where the tenant's MCP connectors answer on the gateway host: `<prefix><name>`, one exact path per server. */
export const MCP_CONNECTOR_PATH_PREFIX = '/mcp/connectors/';
