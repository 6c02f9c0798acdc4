// Whether dist/ was built from the sources as they are now, so that `npm test` builds only when it must.
//   node scripts/build-stamp.mjs write    (the last step of `npm run build`) records a hash of the build's
//                                         inputs in dist/.build-stamp
//   node scripts/build-stamp.mjs ensure   (`pretest`) runs `npm run build` unless the stamp matches them
// A hash of the files' paths and contents, not their times: a checkout or a rebase that leaves the
// sources as they were built needs no build, and one that changes them is seen whatever their mtimes.
// Hashing the ~500 input files takes ~50 ms, the build ~15-25 s. A clean clone has no dist/, hence no
// stamp: it builds. The build removes dist/ (with the stamp) first, so a failed build leaves none.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
const STAMP = join(ROOT, 'dist', '.build-stamp');
// What `npm run build` reads: the server and CLI (tsc), the dashboard (src/web), the docs it renders
// (README.md, docs/, scripts/docs), the oclif manifest (package.json's oclif section, commands/), and
// what they are built with (the lockfile, the TypeScript settings). migrations/ and bin/ ship beside dist/.
const INPUTS = ['src', 'commands', 'scripts', 'docs', 'migrations', 'bin', 'README.md', 'package.json', 'package-lock.json', 'tsconfig.json'];

function inputsHash() {
  const hash = createHash('sha256');
  const all = INPUTS.flatMap((input) => {
    const path = join(ROOT, input);
    try {
      return readdirSync(path, { withFileTypes: true, recursive: true })
        .filter((e) => e.isFile())
        .map((e) => join(e.parentPath, e.name));
    } catch (err) {
      // A file, not a folder (ENOTDIR), or absent (ENOENT: hashed as absent).
      return err.code === 'ENOTDIR' ? [path] : [];
    }
  });
  for (const file of all.map((f) => relative(ROOT, f)).sort()) hash.update(`${file}\0`).update(readFileSync(join(ROOT, file))).update('\0');
  return hash.digest('hex');
}

const mode = process.argv[2];
if (mode === 'write') {
  writeFileSync(STAMP, `${inputsHash()}\n`);
} else if (mode === 'ensure') {
  // The manifest is written beside dist/, not in it: without it the CLI would not find its commands.
  const built = existsSync(STAMP) && existsSync(join(ROOT, 'oclif.manifest.json')) ? readFileSync(STAMP, 'utf8').trim() : null;
  if (built === inputsHash()) {
    console.log('build-stamp: dist/ is up to date with the sources; no build');
  } else {
    console.log(built ? 'build-stamp: the sources changed since the last build; building' : 'build-stamp: no build recorded in dist/; building');
    const r = spawnSync('npm', ['run', 'build'], { stdio: 'inherit', cwd: ROOT });
    process.exit(r.status ?? 1);
  }
} else {
  console.error('usage: node scripts/build-stamp.mjs write|ensure');
  process.exit(2);
}
