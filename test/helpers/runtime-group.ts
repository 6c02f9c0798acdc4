import { readFileSync } from 'node:fs';

/**
 * A runtime's cgroups as the kernel keeps them, found from one of its processes (/proc/<pid>/cgroup): whether
 * it is frozen, what it charges to memory now (page cache included) and what of it is in swap. Read here,
 * not from the service, so a test or bench sees the kernel's own account of what the service did. v1
 * (freezer.state; memory.usage_in_bytes, memsw less usage) or v2 (cgroup.events; memory.current,
 * memory.swap.current), whichever holds the controller. Null: the process is gone, or has no such group.
 */
export interface RuntimeGroupState {
  frozen: boolean | null;
  memoryBytes: number | null;
  swapBytes: number | null;
}

const read = (file: string): string | null => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
};
const num = (file: string): number | null => {
  const t = read(file)?.trim();
  return t && /^\d+$/.test(t) ? Number(t) : null;
};

function v2Root(): string | null {
  for (const line of (read('/proc/self/mountinfo') ?? '').split('\n')) {
    const [head, tail] = line.split(' - ');
    if (tail?.startsWith('cgroup2 ')) return head.split(' ')[4];
  }
  return null;
}

export function runtimeGroup(pid: number): RuntimeGroupState | null {
  const text = read(`/proc/${pid}/cgroup`);
  if (!text) return null;
  const lines = text.split('\n').filter(Boolean);
  const pathOf = (l: string) => l.slice(l.indexOf(':', l.indexOf(':') + 1) + 1);
  const v1 = (c: string) => {
    const l = lines.find((x) => x.split(':')[1]?.split(',').includes(c));
    return l ? `/sys/fs/cgroup/${c}${pathOf(l)}` : null;
  };
  const root2 = v2Root();
  const v2line = lines.find((l) => l.startsWith('0::'));
  const v2 = root2 && v2line ? `${root2}${pathOf(v2line)}` : null;

  let frozen: boolean | null = null;
  const freezer = v1('freezer');
  const v1State = freezer ? read(`${freezer}/freezer.state`)?.trim() : undefined;
  if (v1State && freezer !== '/sys/fs/cgroup/freezer/') frozen = v1State === 'FROZEN';
  if (frozen === null && v2) {
    const events = read(`${v2}/cgroup.events`);
    if (events) frozen = /^frozen 1$/m.test(events);
  }

  let memoryBytes: number | null = null;
  let swapBytes: number | null = null;
  const memory = v1('memory');
  if (memory && num(`${memory}/memory.usage_in_bytes`) !== null) {
    memoryBytes = num(`${memory}/memory.usage_in_bytes`);
    const memsw = num(`${memory}/memory.memsw.usage_in_bytes`);
    swapBytes = memsw !== null && memoryBytes !== null ? Math.max(0, memsw - memoryBytes) : null;
  } else if (v2 && num(`${v2}/memory.current`) !== null) {
    memoryBytes = num(`${v2}/memory.current`);
    swapBytes = num(`${v2}/memory.swap.current`);
  }
  return { frozen, memoryBytes, swapBytes };
}
