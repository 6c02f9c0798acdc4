-- Pairing codes and paired users carry their tenant like every other tenant-owned table (DESIGN.md 3.8),
-- so every query of them filters by it. Rows made before this migration take their gateway's tenant.

alter table pairing_codes add column tenant_id uuid references tenants(id) on delete cascade;
update pairing_codes c set tenant_id = g.tenant_id from gateways g where g.id = c.gateway_id;
alter table pairing_codes alter column tenant_id set not null;

alter table paired_users add column tenant_id uuid references tenants(id) on delete cascade;
update paired_users p set tenant_id = g.tenant_id from gateways g where g.id = p.gateway_id;
alter table paired_users alter column tenant_id set not null;

-- And it is their gateway's tenant: a code or paired user can never name a gateway of another tenant.
alter table gateways add constraint gateways_id_tenant_key unique (id, tenant_id);
alter table pairing_codes add constraint pairing_codes_gateway_tenant_fkey foreign key (gateway_id, tenant_id) references gateways (id, tenant_id) on delete cascade;
alter table paired_users add constraint paired_users_gateway_tenant_fkey foreign key (gateway_id, tenant_id) references gateways (id, tenant_id) on delete cascade;

-- A gateway's codes per chat user (issuing: one pending code, one new code per 10 minutes), and the
-- pending ones of a tenant or gateway (listing).
drop index pairing_codes_gateway_idx;
create index pairing_codes_gateway_idx on pairing_codes (tenant_id, gateway_id, external_user_id, created_at desc);
-- Whether a code ever existed on a gateway (a failed approval of a used, denied or expired code is no guess).
create index pairing_codes_code_idx on pairing_codes (tenant_id, gateway_id, code);
-- Approvals since a moment (the gateway stream's poll).
create index pairing_codes_consumed_idx on pairing_codes (tenant_id, gateway_id, consumed_at) where consumed_at is not null;

create index paired_users_gateway_idx on paired_users (tenant_id, gateway_id, paired_at);
create index paired_users_session_idx on paired_users (tenant_id, session_id) where session_id is not null;

-- migrate:down
drop index if exists paired_users_session_idx;
drop index if exists paired_users_gateway_idx;
drop index if exists pairing_codes_consumed_idx;
drop index if exists pairing_codes_code_idx;
drop index if exists pairing_codes_gateway_idx;
create index pairing_codes_gateway_idx on pairing_codes (gateway_id, external_user_id, created_at desc);
alter table paired_users drop constraint if exists paired_users_gateway_tenant_fkey;
alter table pairing_codes drop constraint if exists pairing_codes_gateway_tenant_fkey;
alter table gateways drop constraint if exists gateways_id_tenant_key;
alter table paired_users drop column tenant_id;
alter table pairing_codes drop column tenant_id;
