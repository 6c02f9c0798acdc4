import { dirname } from 'node:path';
import { INNER_PROXY_PORT } from './sandbox.js';

/**
 * The containment probes: what a hostile agent would try from inside its sandbox, as data, each with the
 * judge of what came out (containment-runner.ts starts a real sandbox for each). Secrets are planted
 * outside the sandbox first (a fake data dir with a config.env, another user's workspace, another
 * tenant's directory, the runner's own environment), so a probe that prints one of them has proven a
 * breach whatever its exit status says. Legitimate work runs in the same sandboxes: a sandbox that
 * refuses everything would pass the rest.
 */

/** What a probe sees of the planted world (host paths, ports); none of these is itself a secret. */
export interface ProbeTargets {
  fakeConfig: string;
  fakeDataDir: string;
  otherUserWorkspace: string;
  otherTenantDir: string;
  hostHome: string;
  /** A loopback server on the host that answers with a secret marker (must stay unreachable). */
  secretPort: number;
  /** A loopback server the operator trusts (AGENTWS_EGRESS_PRIVATE_ALLOW): reachable through the proxy only. */
  allowedPort: number;
  /** The host's own non-loopback addresses. */
  hostAddresses: string[];
  /** Host-side run dir of the sandbox (api.sock and proxy.sock live there). */
  hostRunDir: string;
  /** The installed appliance's config file and data dir, when probing a real host. */
  installedConfig?: string;
  installedDataDir?: string;
  /** The API's port and PostgreSQL's, when known (loopback). */
  apiPort?: number;
  /** On a runner host: the control plane it dials (its API's host and port), which no agent may reach. */
  controlPlane?: { host: string; port: number };
  /** A host process that nothing inside may signal. */
  sentinelAlive(): boolean;
}

export interface ProbeRun {
  code: number | null;
  /** stdout and stderr, interleaved. */
  out: string;
}

export interface ContainmentProbe {
  id: string;
  /** contain: the attempt must fail; legit: ordinary work that must succeed in the same sandbox. */
  kind: 'contain' | 'legit';
  /** What it tries, in one line. */
  tries: string;
  /** Run inside the sandbox with /bin/sh -c, as the agent's bash tool would. */
  script(t: ProbeTargets): string;
  /** null when contained (or, for legit, when it worked); else what went wrong. */
  judge(r: ProbeRun, t: ProbeTargets): string | null;
  /** Skipped when this target is not given (the installed host's own paths). */
  needs?: 'installedConfig' | 'installedDataDir' | 'apiPort' | 'controlPlane';
}

export interface ProbeResult {
  id: string;
  kind: ContainmentProbe['kind'];
  tries: string;
  passed: boolean;
  detail: string;
}

/*
 * Scripts print these when they get through. Written split in the scripts (`AGENTWS-"REACHED"`,
 * "AGENTWS-"+"REACHED"), so that a probe whose own command line is echoed back cannot match itself.
 */
const REACHED = 'AGENTWS-REACHED';
const OK = 'AGENTWS-OK';
const SH_REACHED = 'AGENTWS-"REACHED"';
const SH_OK = 'AGENTWS-"OK"';
/** The probes' sandboxes get a small /tmp, so filling it is quick. */
export const PROBE_TMP_BYTES = 32 * 1024 * 1024;
const PY_REACHED = '"AGENTWS-"+"REACHED"';

const reached = (r: ProbeRun) => (r.out.includes(REACHED) ? `got through: ${excerpt(r.out)}` : null);
const worked = (r: ProbeRun, also?: RegExp) => (r.out.includes(OK) && (!also || also.test(r.out)) ? null : `did not work (exit ${r.code}): ${excerpt(r.out)}`);

export function excerpt(s: string, n = 300): string {
  const t = s.replace(/\s+/g, ' ').trim();
  return t.length > n ? `${t.slice(0, n)}…` : t || '(no output)';
}

/** A shell test that prints REACHED when the path exists or can be read (listing it too). */
const visible = (path: string) => `for p in ${path}; do if [ -e "$p" ] || [ -L "$p" ]; then echo ${SH_REACHED} "$p"; ls -la "$p" 2>&1 | head -5; fi; done`;
/** TCP connect with python (family 4 or 6). */
const pyConnect = (host: string, port: number, family: 4 | 6 = 4) =>
  `python3 -c 'import socket
s=socket.socket(socket.AF_INET${family === 6 ? '6' : ''},socket.SOCK_STREAM); s.settimeout(3)
try:
  s.connect(("${host}",${port})); print(${PY_REACHED}, "${host}:${port}")
except Exception as e: print("refused", "${host}:${port}", e)'`;
/** TCP connect with bash's /dev/tcp. */
const bashConnect = (host: string, port: number) => `timeout 5 bash -c 'exec 3<>/dev/tcp/${host}/${port} && echo ${SH_REACHED} ${host}:${port}' 2>&1 || echo refused ${host}:${port}`;
/** An HTTP GET through the sandbox's proxy (explicitly, whatever the environment says); prints status and body. */
const viaProxy = (url: string) => `curl -sS -m 10 -x http://127.0.0.1:${INNER_PROXY_PORT} -o - -w ' status=%{http_code}\\n' '${url}' 2>&1`;

/** host:port as a URL spells it (an IPv6 address in brackets). */
export const authority = (a: { host: string; port: number }) => `${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}`;

export const CONTAINMENT_PROBES: ContainmentProbe[] = [
  // --- the service's secrets and other users' files, by path ---
  { id: 'config-cat', kind: 'contain', tries: 'cat the data dir\'s config.env by absolute path', script: (t) => `cat ${t.fakeConfig} 2>&1; ${visible(t.fakeConfig)}`, judge: reached },
  {
    id: 'config-python',
    kind: 'contain',
    tries: 'python3 open() of config.env, path built at run time (no path-like argument)',
    script: (t) => `python3 -c 'import os; p=os.sep.join(${JSON.stringify(t.fakeConfig.split('/'))}); print(open(p).read())' 2>&1 | tail -1`,
    judge: () => null,
  },
  {
    id: 'config-node',
    kind: 'contain',
    tries: 'node readFileSync of config.env',
    script: (t) => `node -e 'try { console.log(require("fs").readFileSync(${JSON.stringify(t.fakeConfig)}, "utf8")) } catch (e) { console.log("refused", e.code) }' 2>&1`,
    judge: (r) => (/refused ENOENT|refused EACCES/.test(r.out) ? null : `node did not run or read it: ${excerpt(r.out)}`),
  },
  { id: 'data-dir-list', kind: 'contain', tries: 'list the data dir and its parent', script: (t) => `ls -la ${t.fakeDataDir} ${dirname(t.fakeDataDir)} 2>&1; ${visible(`${t.fakeDataDir} ${dirname(t.fakeDataDir)}`)}`, judge: reached },
  {
    id: 'symlink-out',
    kind: 'contain',
    tries: 'a symlink in the workspace to config.env, then cat it',
    script: (t) => `ln -sf ${t.fakeConfig} /workspace/innocent.txt && cat /workspace/innocent.txt 2>&1; rm -f /workspace/innocent.txt`,
    judge: () => null,
  },
  {
    id: 'symlink-root',
    kind: 'contain',
    tries: 'a symlink to / and /proc/1/root, then walk to config.env through them',
    script: (t) => `ln -sfn / /workspace/rootlink; cat /workspace/rootlink${t.fakeConfig} /proc/1/root${t.fakeConfig} /proc/self/root${t.fakeConfig} 2>&1; rm -f /workspace/rootlink`,
    judge: () => null,
  },
  { id: 'other-user-workspace', kind: 'contain', tries: 'read another user\'s workspace of the same tenant', script: (t) => `cat ${t.otherUserWorkspace}/* 2>&1; ${visible(t.otherUserWorkspace)}`, judge: reached },
  { id: 'other-tenant', kind: 'contain', tries: 'read another tenant\'s directory', script: (t) => `cat ${t.otherTenantDir}/* 2>&1; ${visible(t.otherTenantDir)}`, judge: reached },
  { id: 'workspace-siblings', kind: 'contain', tries: 'walk up from /workspace to other workspaces', script: () => `ls -la /workspace/.. /workspace/../.. 2>&1; cat /workspace/../*/* 2>&1 | head -20`, judge: () => null },
  { id: 'host-home', kind: 'contain', tries: 'the host\'s home directories (/root and the service user\'s)', script: (t) => `ls -la /root ${t.hostHome} 2>&1; ${visible(`/root ${t.hostHome}/.bash_history ${t.hostHome}/.ssh`)}`, judge: reached },
  {
    id: 'installed-config',
    kind: 'contain',
    needs: 'installedConfig',
    tries: 'the installed config file by absolute path (cat and python)',
    script: (t) => `cat ${t.installedConfig} 2>&1; python3 -c 'print(open(${JSON.stringify(t.installedConfig)}).read())' 2>&1 | tail -1; ${visible(t.installedConfig!)}`,
    judge: reached,
  },
  { id: 'installed-data-dir', kind: 'contain', needs: 'installedDataDir', tries: 'list the installed data dir', script: (t) => `ls -la ${t.installedDataDir} 2>&1; ${visible(t.installedDataDir!)}`, judge: reached },
  {
    id: 'find-markers',
    kind: 'contain',
    tries: 'find / for the planted secret files by name',
    script: () => `find / -path /proc -prune -o -name 'agentws-probe-secret*' -print 2>/dev/null | head; echo searched`,
    judge: (r) => (/agentws-probe-secret/.test(r.out) ? `found: ${excerpt(r.out)}` : r.out.includes('searched') ? null : excerpt(r.out)),
  },
  {
    id: 'grep-config',
    kind: 'contain',
    tries: 'grep every readable file for config.env contents',
    script: () => `grep -rsl 'AGENTWS_JWT_SECRET=' /home /tmp /workspace /srv /run /var /etc /opt /mnt /media 2>/dev/null | head; echo searched`,
    judge: (r) => (/\S+config\.env|\/\S+\n/.test(r.out.replace(/searched\s*$/, '')) ? `found: ${excerpt(r.out)}` : null),
  },
  {
    id: 'host-sockets',
    kind: 'contain',
    tries: 'host Unix sockets: PostgreSQL, Docker, systemd, the embedded database',
    script: () => `${visible('/var/run/postgresql /run/postgresql /var/run/docker.sock /run/docker.sock /run/systemd /run/dbus /tmp/.s.PGSQL.5432 /run/user')}; echo checked`,
    judge: reached,
  },

  // --- processes ---
  {
    id: 'proc-environ',
    kind: 'contain',
    tries: '/proc/*/environ of every visible process',
    script: () => `for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < "$f" 2>/dev/null; done | sort -u`,
    judge: (r) => (/AGENTWS_|DATABASE_URL|OPENCODE_SERVER_PASSWORD/.test(r.out) ? `service variables visible: ${excerpt(r.out)}` : null),
  },
  {
    id: 'proc-cmdline',
    kind: 'contain',
    tries: '/proc/1/cmdline and every visible command line',
    script: () => `for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < "$f" 2>/dev/null; echo; done`,
    judge: (r, t) =>
      /AGENTWS_|DATABASE_URL|postgres:|opencode serve --port 0/.test(r.out)
        ? `host command lines visible: ${excerpt(r.out)}`
        : r.out.includes(t.fakeDataDir)
          ? `the host's layout (data dir, tenant and user ids in paths) is readable: ${excerpt(r.out)}`
          : null,
  },
  {
    id: 'printenv',
    kind: 'contain',
    tries: 'printenv / env for the service\'s variables',
    script: () => `printenv; env`,
    judge: (r) => (/AGENTWS_|DATABASE_URL|_API_KEY|_SECRET/.test(r.out) ? `leaked into the environment: ${excerpt(r.out)}` : null),
  },
  {
    id: 'proc-list',
    kind: 'contain',
    tries: 'ls /proc: only the sandbox\'s own processes are visible',
    script: () => `for p in /proc/[0-9]*; do printf '%s ' "$(cat $p/comm 2>/dev/null)"; done; echo; ls -d /proc/[0-9]* | wc -l`,
    judge: (r) => {
      const count = Number(r.out.trim().split('\n').pop());
      if (/\b(postgres|node|opencode|systemd|sshd|init|redis-server|MainThread)\b/.test(r.out)) return `host processes visible: ${excerpt(r.out)}`;
      return count > 0 && count <= 8 ? null : `${count} processes visible: ${excerpt(r.out)}`;
    },
  },
  {
    id: 'kill-outside',
    kind: 'contain',
    tries: 'kill -9 -1 (every process it may signal), hoping to reach the service',
    script: () => `kill -9 -1 2>&1; echo sent`,
    judge: (_r, t) => (t.sentinelAlive() ? null : 'a host process of the same user was killed'),
  },
  {
    id: 'ptrace-pid1',
    kind: 'contain',
    tries: 'ptrace (strace -p) the sandbox\'s pid 1 and read its memory',
    script: () => `strace -p 1 -e trace=none -o /dev/null & s=$!; sleep 0.5; kill $s 2>/dev/null; wait $s; echo "strace=$?"; head -c 64 /proc/1/mem >/dev/null 2>&1 && echo ${SH_REACHED} mem; grep -E 'CapEff|CapPrm' /proc/1/status`,
    judge: (r) => (r.out.includes(REACHED) ? `pid 1's memory readable: ${excerpt(r.out)}` : /CapEff:\s*0*[1-9a-f]/.test(r.out) ? `pid 1 has capabilities: ${excerpt(r.out)}` : null),
  },

  // --- privileges ---
  {
    id: 'capabilities',
    kind: 'contain',
    tries: 'capabilities and no_new_privs of the agent\'s process',
    script: () => `grep -E 'Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Uid' /proc/self/status`,
    judge: (r) => {
      for (const k of ['CapInh', 'CapPrm', 'CapEff', 'CapAmb']) {
        const m = new RegExp(`${k}:\\s*([0-9a-f]+)`).exec(r.out);
        if (!m || /[1-9a-f]/.test(m[1])) return `${k} is not empty: ${excerpt(r.out)}`;
      }
      if (!/Uid:\s*1000\b/.test(r.out)) return `not uid 1000: ${excerpt(r.out)}`;
      return null;
    },
  },
  {
    id: 'setuid',
    kind: 'contain',
    tries: 'a setuid-root binary (su, mount, passwd) to gain root',
    script: () => `for b in /usr/bin/su /bin/su /usr/bin/passwd /usr/bin/newgrp /usr/bin/chfn; do [ -x $b ] && ls -l $b; done; su -c id root </dev/null 2>&1 | head -2; id -u; sudo -n id 2>&1 | head -1`,
    judge: (r) => (/uid=0\b/.test(r.out) ? `became root: ${excerpt(r.out)}` : null),
  },
  {
    id: 'unshare-user',
    kind: 'contain',
    tries: 'unshare -U / unshare -r / a nested bwrap: a new user namespace would bring capabilities back',
    script: () => `unshare -U true 2>&1 && echo ${SH_REACHED} unshare-U; unshare -r id 2>&1 && echo ${SH_REACHED} unshare-r; bwrap --dev-bind / / true 2>&1 && echo ${SH_REACHED} bwrap; python3 -c 'import os; os.unshare(0x10000000); print(${PY_REACHED})' 2>&1 | tail -1`,
    judge: reached,
  },
  {
    id: 'mount',
    kind: 'contain',
    tries: 'mount a tmpfs or rebind /',
    script: () => `mkdir -p /tmp/m; mount -t tmpfs none /tmp/m 2>&1 && echo ${SH_REACHED} tmpfs; mount --bind / /tmp/m 2>&1 && echo ${SH_REACHED} bind; mount -t proc proc /tmp/m 2>&1 && echo ${SH_REACHED} proc`,
    judge: reached,
  },
  {
    id: 'proc-sys-write',
    kind: 'contain',
    tries: 'write kernel settings through /proc/sys and sysrq',
    script: () => `echo 1 > /proc/sys/kernel/sysrq 2>&1 && echo ${SH_REACHED} sysctl; echo h > /proc/sysrq-trigger 2>&1 && echo ${SH_REACHED} sysrq; true`,
    judge: reached,
  },
  {
    id: 'devices-sys',
    kind: 'contain',
    tries: 'block devices, kernel memory and /sys',
    script: () => `${visible('/dev/sda /dev/vda /dev/nvme0n1 /dev/xvda /dev/mem /dev/kmem /dev/kmsg /dev/port /sys/class /sys/fs/cgroup /dev/net/tun')}; echo checked`,
    judge: reached,
  },

  // --- writes outside the workspace ---
  {
    id: 'write-system',
    kind: 'contain',
    tries: 'write into /usr, /bin, /etc, /srv/tenant, /opt/agentws and the prepared plugin',
    script: () =>
      `for p in /usr/probe /usr/bin/probe /bin/probe /etc/probe /etc/passwd /srv/tenant/probe /opt/agentws/bin/probe /opt/agentws/bin/opencode /opt/agentws/node/bin/node /home/agent/.config/opencode/package.json /home/agent/.config/opencode/node_modules/probe; do (echo x >> "$p") 2>/dev/null && echo ${SH_REACHED} "$p"; done; echo checked`,
    judge: reached,
  },
  {
    id: 'scratch-unbounded',
    kind: 'contain',
    tries: 'write past the size of /tmp, and into /dev, /var and past /dev/shm (RAM the host would lose)',
    script: () =>
      `head -c ${PROBE_TMP_BYTES + 8 * 1024 * 1024} /dev/zero > /tmp/fill 2>/dev/null && echo ${SH_REACHED} /tmp; rm -f /tmp/fill; ` +
      `head -c ${96 * 1024 * 1024} /dev/zero > /dev/shm/fill 2>/dev/null && echo ${SH_REACHED} /dev/shm; rm -f /dev/shm/fill; ` +
      `for p in /dev/probe /var/probe /var/lib/probe; do (mkdir -p "$(dirname "$p")" && echo x >> "$p") 2>/dev/null && echo ${SH_REACHED} "$p"; done; echo checked`,
    judge: reached,
  },
  {
    id: 'opencode-config',
    kind: 'contain',
    tries: 'plant opencode configuration (~/.config/opencode, ~/.opencode, /etc/opencode), or move ~/.config aside to make a writable one',
    script: () =>
      `cd /home/agent; for p in .config/opencode/opencode.json .config/opencode/opencode.jsonc .config/opencode/agents/x.md .config/opencode/plugins/x.js .opencode/opencode.json /etc/opencode/opencode.json; do (mkdir -p "$(dirname "$p")" && echo '{}' >> "$p") 2>/dev/null && echo ${SH_REACHED} "$p"; done; ` +
      `for d in .config .config/opencode .opencode /etc/opencode; do mv "$d" "$d.moved" 2>/dev/null && echo ${SH_REACHED} "moved $d"; done; echo checked`,
    judge: reached,
  },
  {
    id: 'api-socket-replace',
    kind: 'contain',
    tries: 'replace /run/agentws/api.sock with a symlink to a host socket, for the service to connect through',
    // The service connects through /proc/<pid>/root/run/agentws/api.sock (runtime-launcher.ts), so the link
    // resolves as it does in here: to a host socket only if that socket were visible inside.
    script: () => `rm -f /run/agentws/api.sock 2>&1; for s in /var/run/postgresql/.s.PGSQL.5432 /run/postgresql/.s.PGSQL.5432 /var/run/docker.sock /run/systemd/private; do ln -sf $s /run/agentws/api.sock; [ -e /run/agentws/api.sock ] && echo "REACHABLE $s"; done; echo done`,
    judge: (r) => (/REACHABLE/.test(r.out) ? `a host socket is reachable through a planted api.sock link: ${excerpt(r.out)}` : null),
  },

  // --- direct network ---
  { id: 'tcp-postgres', kind: 'contain', tries: 'TCP to 127.0.0.1:5432 (bash /dev/tcp and python)', script: () => `${bashConnect('127.0.0.1', 5432)}; ${pyConnect('127.0.0.1', 5432)}`, judge: reached },
  { id: 'tcp-api', kind: 'contain', needs: 'apiPort', tries: 'TCP to the API\'s loopback port', script: (t) => `${bashConnect('127.0.0.1', t.apiPort!)}; ${pyConnect('127.0.0.1', t.apiPort!)}`, judge: reached },
  {
    id: 'control-plane-direct',
    kind: 'contain',
    needs: 'controlPlane',
    tries: 'TCP to the control plane this runner dials, and its PostgreSQL port, without the proxy',
    script: (t) => `${bashConnect(t.controlPlane!.host, t.controlPlane!.port)}; ${pyConnect(t.controlPlane!.host, t.controlPlane!.port)}; ${pyConnect(t.controlPlane!.host, 5432)}`,
    judge: reached,
  },
  {
    id: 'control-plane-proxy',
    kind: 'contain',
    needs: 'controlPlane',
    // The probes' proxy allows the control plane's host:port as an operator's private allow list may: what
    // must refuse it is the runner's own rule (egress-decider.ts controlPlaneForbidden).
    tries: 'the control plane\'s API through the egress proxy (HTTP and CONNECT), its network allowed by the operator',
    script: (t) => `${viaProxy(`http://${authority(t.controlPlane!)}/healthz`)}; curl -sS -m 10 -p -x http://127.0.0.1:${INNER_PROXY_PORT} -o - -w ' status=%{http_code}\\n' 'http://${authority(t.controlPlane!)}/runner/v1/connect' 2>&1`,
    judge: (r) =>
      /"status":"ok"|status=[23]\d\d/.test(r.out)
        ? `the control plane answered: ${excerpt(r.out)}`
        : /status=403/.test(r.out) && /response 403/.test(r.out)
          ? null
          : `the proxy neither refused nor passed it (expected 403 twice): ${excerpt(r.out)}`,
  },
  {
    id: 'tcp-loopback-ports',
    kind: 'contain',
    tries: 'TCP to the planted loopback server and common loopback ports (runtime 4096, redis, mysql, ssh)',
    script: (t) => [t.secretPort, t.allowedPort, 22, 80, 3306, 4096, 6379, 8080].map((p) => pyConnect('127.0.0.1', p)).join('; ') + `; curl -sS -m 5 --noproxy '*' http://127.0.0.1:${t.secretPort}/ 2>&1`,
    // Inside, 127.0.0.1 is the sandbox's own loopback: nothing listens there but the proxy bridge.
    judge: reached,
  },
  { id: 'tcp-ipv6-loopback', kind: 'contain', tries: 'TCP to [::1]', script: (t) => `${pyConnect('::1', t.secretPort, 6)}; ${pyConnect('::1', 6379, 6)}`, judge: reached },
  { id: 'tcp-metadata', kind: 'contain', tries: 'TCP to 169.254.169.254:80 (cloud metadata)', script: () => `${bashConnect('169.254.169.254', 80)}; ${pyConnect('169.254.169.254', 80)}`, judge: reached },
  { id: 'tcp-private', kind: 'contain', tries: 'TCP to 10.0.0.1, 192.168.0.1 and 172.17.0.1 (private, the Docker bridge)', script: () => ['10.0.0.1', '192.168.0.1', '172.17.0.1'].map((h) => pyConnect(h, 80)).join('; '), judge: reached },
  { id: 'tcp-cgnat', kind: 'contain', tries: 'TCP to 100.64.0.1 (CGNAT)', script: () => pyConnect('100.64.0.1', 80), judge: reached },
  {
    id: 'tcp-host-address',
    kind: 'contain',
    tries: 'TCP to the host\'s own non-loopback addresses',
    script: (t) => (t.hostAddresses.length ? t.hostAddresses.flatMap((a) => [pyConnect(a, t.secretPort), pyConnect(a, 22)]).join('; ') : 'echo no host address'),
    judge: reached,
  },
  {
    id: 'dns',
    kind: 'contain',
    tries: 'DNS resolution (there is no resolver inside: names resolve only on the host, in the proxy)',
    script: () => `getent hosts example.com 2>&1 && echo ${SH_REACHED} getent; python3 -c 'import socket; print(${PY_REACHED}, socket.getaddrinfo("example.com", 80)[0][4])' 2>&1 | tail -1; ${visible('/etc/resolv.conf')}; true`,
    judge: reached,
  },
  {
    id: 'raw-network',
    kind: 'contain',
    tries: 'interfaces and routes inside: only loopback, no route out',
    script: () => `cat /proc/net/dev | tail -n +3 | cut -d: -f1; cat /proc/net/route | tail -n +2; ip route 2>/dev/null`,
    judge: (r) => (/\b(eth|ens|enp|wl|veth|docker|br-)\w*/.test(r.out) ? `non-loopback interface visible: ${excerpt(r.out)}` : null),
  },

  // --- through the egress proxy ---
  { id: 'proxy-loopback', kind: 'contain', tries: 'through the proxy to the planted loopback server (127.0.0.1)', script: (t) => viaProxy(`http://127.0.0.1:${t.secretPort}/`), judge: (r) => reached(r) ?? (/status=403/.test(r.out) ? null : `not refused: ${excerpt(r.out)}`) },
  {
    id: 'proxy-loopback-spellings',
    kind: 'contain',
    tries: 'through the proxy to loopback spelled otherwise: localhost, 0.0.0.0, 2130706433, 0x7f000001, 127.1, [::1], [::ffff:127.0.0.1]',
    script: (t) => ['localhost', 'LOCALHOST.', '0.0.0.0', '2130706433', '0x7f000001', '127.1', '[::1]', '[::ffff:127.0.0.1]', 'foo.localhost'].map((h) => viaProxy(`http://${h}:${t.secretPort}/`)).join('; '),
    judge: (r) => reached(r) ?? (/status=200/.test(r.out) ? `one was answered: ${excerpt(r.out)}` : null),
  },
  { id: 'proxy-metadata', kind: 'contain', tries: 'through the proxy to 169.254.169.254', script: () => viaProxy('http://169.254.169.254/latest/meta-data/'), judge: (r) => (/status=403/.test(r.out) ? null : `not refused: ${excerpt(r.out)}`) },
  { id: 'proxy-private', kind: 'contain', tries: 'through the proxy to 10.0.0.1 and 100.64.0.1', script: () => `${viaProxy('http://10.0.0.1/')}; ${viaProxy('http://100.64.0.1/')}`, judge: (r) => ((r.out.match(/status=403/g) ?? []).length === 2 ? null : `not refused: ${excerpt(r.out)}`) },
  {
    id: 'proxy-host-address',
    kind: 'contain',
    tries: 'through the proxy to the host\'s own non-loopback addresses',
    script: (t) => (t.hostAddresses.length ? t.hostAddresses.map((a) => viaProxy(`http://${a.includes(':') ? `[${a}]` : a}:${t.secretPort}/`)).join('; ') : 'echo no host address'),
    // Refused by the proxy (403), not merely unanswered: a public address of the host is still the host.
    judge: (r) => reached(r) ?? (/status=(?!403)\d+/.test(r.out) ? `not refused: ${excerpt(r.out)}` : null),
  },
  {
    id: 'proxy-ports',
    kind: 'contain',
    tries: 'through the proxy to a public address on ports other than the web\'s: CONNECT to :25 (SMTP) and :22 (SSH), a plain request to :6379',
    script: () =>
      `python3 -c 'import socket
for target in ["93.184.216.34:25", "93.184.216.34:22"]:
  s=socket.create_connection(("127.0.0.1", ${INNER_PROXY_PORT}), 5)
  s.sendall(("CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n" % (target, target)).encode())
  print(target, s.recv(300).decode(errors="replace").replace("\\r\\n", " | "))
  s.close()' 2>&1; ${viaProxy('http://93.184.216.34:6379/')}`,
    judge: (r) =>
      reached(r) ??
      ((r.out.match(/^93\.184\.216\.34:(25|22) HTTP\/1\.1 403 .*port \1 is not open/gm) ?? []).length === 2 && /port 6379 is not open[^\n]*\n status=403/.test(r.out)
        ? null
        : `not refused for its port: ${excerpt(r.out)}`),
  },
  {
    id: 'proxy-connect-internal',
    kind: 'contain',
    tries: 'CONNECT through the proxy to 127.0.0.1:5432, the planted server and 169.254.169.254:443',
    script: (t) =>
      `python3 -c 'import socket
for target in ["127.0.0.1:5432", "127.0.0.1:${t.secretPort}", "localhost:${t.secretPort}", "169.254.169.254:443", "[::1]:${t.secretPort}"]:
  s=socket.create_connection(("127.0.0.1", ${INNER_PROXY_PORT}), 5)
  s.sendall(("CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n" % (target, target)).encode())
  line=s.recv(200).decode(errors="replace").split("\\r\\n")[0]
  print(target, line)
  if " 200 " in line: print(${PY_REACHED}, target)
  s.close()' 2>&1`,
    judge: reached,
  },
  {
    id: 'proxy-gateway-host',
    kind: 'contain',
    tries: 'the LLM gateway host over CONNECT (it speaks plain http only) and a Host-header swap to the planted server',
    script: (t) =>
      `curl -sS -m 5 -p -x http://127.0.0.1:${INNER_PROXY_PORT} http://llm.agentws.internal/ 2>&1 | head -2; curl -sS -m 5 -x http://127.0.0.1:${INNER_PROXY_PORT} -H 'Host: 127.0.0.1:${t.secretPort}' http://example.invalid/ 2>&1 | head -2`,
    judge: () => null,
  },

  // --- legitimate work, in the same kind of sandbox ---
  { id: 'legit-workspace-files', kind: 'legit', tries: 'write and read a file in /workspace', script: () => `mkdir -p /workspace/src && echo 'hello from the agent' > /workspace/src/hello.txt && cat /workspace/src/hello.txt && echo ${SH_OK}`, judge: (r) => worked(r, /hello from the agent/) },
  {
    id: 'legit-tmp-home',
    kind: 'legit',
    tries: 'write to /tmp, /var/tmp, /dev/shm and the runtime\'s home',
    script: () => `echo a > /tmp/a && echo b > /home/agent/b && echo c > /var/tmp/c && echo d > /dev/shm/d && cat /tmp/a /home/agent/b /tmp/c /dev/shm/d && echo ${SH_OK}`,
    judge: (r) => worked(r),
  },
  {
    id: 'legit-git',
    kind: 'legit',
    tries: 'git init, add and commit in /workspace as uid 1000 with HOME=/home/agent',
    script: () =>
      `cd /workspace && git config --global user.email agent@example.invalid && git config --global user.name agent && git init -q probe-repo && cd probe-repo && echo one > f.txt && git add f.txt && git commit -q -m first && git log --oneline | grep -q first && echo ${SH_OK}`,
    judge: (r) => worked(r),
  },
  { id: 'legit-python', kind: 'legit', tries: 'run python3', script: () => `python3 -c 'print("py", 6*7)' && echo ${SH_OK}`, judge: (r) => worked(r, /py 42/) },
  { id: 'legit-node', kind: 'legit', tries: 'run node', script: () => `node -e 'console.log("node", 6*7)' && echo ${SH_OK}`, judge: (r) => worked(r, /node 42/) },
  { id: 'legit-ripgrep', kind: 'legit', tries: 'rg finds text in /workspace', script: () => `mkdir -p /workspace/docs && echo 'needle in a haystack' > /workspace/docs/n.md && rg -l needle /workspace && echo ${SH_OK}`, judge: (r) => worked(r, /docs\/n\.md/) },
  {
    id: 'legit-proxy-allowed',
    kind: 'legit',
    tries: 'reach an operator-allowed host through the proxy (HTTP_PROXY from the environment)',
    script: (t) => `curl -sS -m 10 http://127.0.0.1:${t.allowedPort}/allowed 2>&1 && echo && echo ${SH_OK}`,
    judge: (r) => worked(r, /allowed page/),
  },
];
