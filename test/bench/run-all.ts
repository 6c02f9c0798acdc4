/**
 * Runs the benchmarks and prints their figures, each with its baseline measured in the same run.
 * Usage: npm run bench [-- name ...]   (names: see `benches` below)
 * Exit code 1 when a target is not met.
 */
import { auditLog } from './audit.bench.js';
import { changesBench } from './changes.bench.js';
import { codeHostWebhooks, codeHostWorking } from './codehost-webhooks.bench.js';
import { authMeThroughput } from './auth-me-throughput.bench.js';
import { authStatusThroughput } from './auth-status-throughput.bench.js';
import { cliStartup } from './cli-startup.bench.js';
import { gatewayApproval, gatewayInbound } from './gateways.bench.js';
import { gitGatewayBench } from './git-gateway.bench.js';
import { limitsBench } from './limits.bench.js';
import { llmGateway } from './llm-gateway.bench.js';
import { memoryInjection } from './memory-injection.bench.js';
import { mcpGatewayBench } from './mcp-gateway.bench.js';
import { memoriesBench } from './memories.bench.js';
import { orchestratorBench } from './orchestrator.bench.js';
import { promptLatency } from './prompt-latency.bench.js';
import { runtimeMemory } from './runtime-memory.bench.js';
import { runtimeCold, runtimeColdServe } from './runtime-cold.bench.js';
import { runtimePageout } from './runtime-pageout.bench.js';
import { runtimePool } from './runtime-pool.bench.js';
import { runtimeWaves } from './runtime-waves.bench.js';
import { runnersBench } from './runners.bench.js';
import { serveReady } from './serve-ready.bench.js';
import { sessionsSearchBench } from './sessions-search.bench.js';
import { skillsBench } from './skills.bench.js';
import { spendingBench } from './spending.bench.js';
import { stopBench } from './stop.bench.js';
import { sseFanout } from './sse-fanout.bench.js';
import { sseMemory } from './sse-memory.bench.js';
import { terminalBench } from './terminal.bench.js';
import { webBench } from './web.bench.js';
import { workspaceFilesBench } from './workspace-files.bench.js';

const benches: Record<string, () => Promise<boolean>> = {
  'cli-startup': cliStartup,
  'serve-ready': serveReady,
  'auth-status': authStatusThroughput,
  'auth-me': authMeThroughput,
  audit: auditLog,
  'sse-fanout': sseFanout,
  'prompt-latency': promptLatency,
  'sse-memory': sseMemory,
  'gateway-approval': gatewayApproval,
  'gateway-inbound': gatewayInbound,
  'llm-gateway': llmGateway,
  'git-gateway': gitGatewayBench,
  'mcp-gateway': mcpGatewayBench,
  spending: spendingBench,
  'runtime-pool': runtimePool,
  'runtime-waves': runtimeWaves,
  'runtime-pageout': runtimePageout,
  'runtime-memory': runtimeMemory,
  'runtime-cold': runtimeCold,
  'runtime-cold-serve': runtimeColdServe,
  runners: runnersBench,
  'memory-injection': memoryInjection,
  memories: memoriesBench,
  orchestrator: orchestratorBench,
  skills: skillsBench,
  web: webBench,
  limits: limitsBench,
  changes: changesBench,
  'workspace-files': workspaceFilesBench,
  terminal: terminalBench,
  stop: stopBench,
  'sessions-search': sessionsSearchBench,
  'codehost-webhooks': codeHostWebhooks,
  'codehost-working': codeHostWorking,
};

const wanted = process.argv.slice(2);
const unknown = wanted.filter((w) => !(w in benches));
if (unknown.length) {
  console.error(`unknown benchmark(s): ${unknown.join(', ')}; known: ${Object.keys(benches).join(', ')}`);
  process.exit(2);
}
console.log(`# agentws benchmarks — ${new Date().toISOString()} — node ${process.version}, ${(await import('node:os')).cpus().length} cores`);
let ok = true;
for (const [name, run] of Object.entries(benches)) {
  if (wanted.length && !wanted.includes(name)) continue;
  ok = (await run()) && ok;
}
process.exit(ok ? 0 : 1);
