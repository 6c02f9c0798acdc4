// The API's answers as the dashboard receives them, from the TypeBox schemas the server validates and
// documents them with (the route files; /v1/openapi.json is made from the same schemas), so the two
// cannot drift. Type-only imports: esbuild drops them, nothing of TypeBox or the server reaches the bundle.
import type { Static, TSchema } from '@sinclair/typebox';
import type { AuditEntry as AuditEntrySchema, Role as RoleSchema, UsageDigest, UsageSeries as UsageSeriesSchema, User as UserSchema } from '../http/routes/v1/admin.routes.js';
import type { AuthStatus as AuthStatusSchema, Me as MeSchema } from '../http/routes/v1/auth.routes.js';
import type { Delivery as DeliverySchema, Webhook as WebhookSchema } from '../http/routes/v1/codehost-admin.routes.js';
import type { McpServer as McpServerSchema } from '../core/connectors/mcp-servers.schemas.js';
import type { AccessRule as AccessRuleSchema, Connection, GitHost as GitHostSchema, Mine } from '../http/routes/v1/connectors-git.routes.js';
import type { Embedder as EmbedderSchema } from '../http/routes/v1/embedder.routes.js';
import type { Code, Gateway } from '../http/routes/v1/gateways.routes.js';
import type { Job as JobSchema } from '../http/routes/v1/jobs.routes.js';
import type { Memory as MemorySchema } from '../http/routes/v1/memories.routes.js';
import type { PlanDetail as PlanDetailSchema, PlanListItem } from '../http/routes/v1/orchestrate.routes.js';
import type { Provider as ProviderSchema, RuntimeStatus as RuntimeStatusSchema, Template as TemplateSchema } from '../http/routes/v1/runtime.routes.js';
import type { ChangeSet as ChangeSetSchema, FileChange as FileChangeSchema } from '../http/routes/v1/session-changes.routes.js';
import type { SearchResult as SearchResultSchema, SessionListItem, SessionListPage } from '../http/routes/v1/session-manage.routes.js';
import type { Branch as BranchSchema, ModelCatalog as ModelCatalogSchema, Model as ModelSchema, SessionModel as SessionModelSchema } from '../http/routes/v1/session-models.routes.js';
import type { HandOver, SessionAccess as SessionAccessSchema, Share as ShareSchema, SharedSession as SharedSessionSchema } from '../http/routes/v1/session-shares.routes.js';
import type { Setup, ProviderTest } from '../http/routes/v1/setup.routes.js';
import type { Skill as SkillSchema, SkillDetail as SkillDetailSchema } from '../http/routes/v1/skills.routes.js';
import type { Team as TeamSchema } from '../http/routes/v1/teams.routes.js';
import type { Token } from '../http/routes/v1/tokens.routes.js';
import type { Entry as EntrySchema } from '../http/routes/v1/workspace.routes.js';

/** What JSON carries of a value: a Date the server returns arrives as its ISO 8601 string (arrays and tuples keep their form). */
type Json<T> = T extends Date ? string : T extends object ? { [K in keyof T]: Json<T[K]> } : T;

/** The answer a schema describes, as the browser parses it. */
type Wire<S extends TSchema> = Json<Static<S>>;

export type AuthStatus = Wire<typeof AuthStatusSchema>;
export type Me = Wire<typeof MeSchema>;
export type Permissions = Me['permissions'];
export type User = Wire<typeof UserSchema>;
export type Role = Wire<typeof RoleSchema>;
export type AuditEntry = Wire<typeof AuditEntrySchema>;
export type Usage = Wire<typeof UsageDigest>;
export type UsageSeries = Wire<typeof UsageSeriesSchema>;
export type Team = Wire<typeof TeamSchema>;
export type Template = Wire<typeof TemplateSchema>;
export type Provider = Wire<typeof ProviderSchema>;
export type RuntimeStatus = Wire<typeof RuntimeStatusSchema>;
export type SetupState = Wire<typeof Setup>;
export type TestResult = Wire<typeof ProviderTest>;
export type GatewayInfo = Wire<typeof Gateway>;
export type PairingCode = Wire<typeof Code>;
export type GitHost = Wire<typeof GitHostSchema>;
export type AccessRule = Wire<typeof AccessRuleSchema>;
export type HostConnection = Wire<typeof Connection>;
export type MyGitConnection = Wire<typeof Mine>;
export type McpServerInfo = Wire<typeof McpServerSchema>;
export type McpAccess = McpServerInfo['access'][number];

export type CredentialKind = GitHost['credentialKind'];
export type UserConnections = GitHost['userConnections'];
export type Webhook = Wire<typeof WebhookSchema>;
export type Delivery = Wire<typeof DeliverySchema>;
export type Embedder = Wire<typeof EmbedderSchema>;
export type Job = Wire<typeof JobSchema>;
export type Memory = Wire<typeof MemorySchema>;
export type PlanItem = Wire<typeof PlanListItem>;
export type PlanDetail = Wire<typeof PlanDetailSchema>;
export type Skill = Wire<typeof SkillSchema>;
export type SkillDetail = Wire<typeof SkillDetailSchema>;
export type FileChange = Wire<typeof FileChangeSchema>;
export type ChangeSet = Wire<typeof ChangeSetSchema>;
export type PersonalToken = Wire<typeof Token>;
export type Entry = Wire<typeof EntrySchema>;
export type ListedSession = Wire<typeof SessionListItem>;
export type SearchResult = Wire<typeof SearchResultSchema>;
export type SessionPage = Wire<typeof SessionListPage>;
export type Share = Wire<typeof ShareSchema>;
export type ModelChoice = Wire<typeof ModelSchema>;
export type SessionModel = Wire<typeof SessionModelSchema>;
export type ModelCatalog = Wire<typeof ModelCatalogSchema>;
export type Branch = Wire<typeof BranchSchema>;
export type SharedSession = Wire<typeof SharedSessionSchema>;
export type SessionAccess = Wire<typeof SessionAccessSchema>;
export type HandOverResult = Wire<typeof HandOver>;
