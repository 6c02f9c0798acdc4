// Builds the dashboard into dist/web: one ES module (Preact bundled in) and one stylesheet, named by
// their content hash so they can be cached forever, and index.html pointing at them. Also writes
// sizes.json (gzip bytes of the app's own code and of the vendored library, from esbuild's metafile),
// which the web benchmark reports against the budget. Run by `npm run build`.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', '..', 'dist', 'web');
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'assets'), { recursive: true });

const result = await build({
  entryPoints: [join(here, 'main.tsx')],
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2022',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  write: false,
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
});
const js = result.outputFiles[0].contents;
// The terminal (xterm.js): a module of its own, loaded only when a Terminal tab opens, so it adds nothing
// to what every page loads. Its stylesheet joins ours (a static file, as the CSP wants).
const term = await build({
  entryPoints: [join(here, 'xterm-module.ts')],
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2022',
  write: false,
  legalComments: 'none',
  logLevel: 'warning',
});
const termJs = term.outputFiles[0].contents;
const xtermCss = readFileSync(join(here, '..', '..', 'node_modules', '@xterm', 'xterm', 'css', 'xterm.css'));
const css = Buffer.concat([readFileSync(join(here, 'styles.css')), Buffer.from('\n/* @xterm/xterm */\n'), xtermCss]);
const name = (base, ext, bytes) => `${base}-${createHash('sha256').update(bytes).digest('hex').slice(0, 12)}.${ext}`;
const jsName = name('app', 'js', js);
const cssName = name('app', 'css', css);
const termName = name('xterm', 'js', termJs);
writeFileSync(join(out, 'assets', jsName), js);
writeFileSync(join(out, 'assets', termName), termJs);
writeFileSync(join(out, 'assets', cssName), css);
writeFileSync(join(out, 'index.html'), readFileSync(join(here, 'index.html'), 'utf8').replace('{{js}}', jsName).replace('{{css}}', cssName).replace('{{terminal}}', termName));

// What of the bundle is vendored (node_modules) and what is ours, by each input's share of the output.
const inputs = Object.entries(Object.values(result.metafile.outputs)[0].inputs);
const vendoredShare = inputs.filter(([p]) => p.includes('node_modules')).reduce((n, [, i]) => n + i.bytesInOutput, 0);
const total = inputs.reduce((n, [, i]) => n + i.bytesInOutput, 0);
const gz = gzipSync(js, { level: 9 }).length;
const sizes = {
  js: jsName,
  css: cssName,
  bytes: js.length,
  gzip: gz,
  // gzip does not split by input: each part's gzip size is estimated by its share of the raw bytes.
  vendoredGzip: Math.round((gz * vendoredShare) / total),
  appGzip: Math.round((gz * (total - vendoredShare)) / total),
  cssGzip: gzipSync(css, { level: 9 }).length,
  // The terminal's module, fetched only when a Terminal tab opens (not part of the budget above).
  terminal: termName,
  terminalGzip: gzipSync(termJs, { level: 9 }).length,
};
writeFileSync(join(out, 'sizes.json'), JSON.stringify(sizes, null, 2));
console.log(`dashboard: ${jsName} ${(sizes.gzip / 1024).toFixed(1)} KB gzip (app ${(sizes.appGzip / 1024).toFixed(1)}, vendored ${(sizes.vendoredGzip / 1024).toFixed(1)}), ${cssName}; terminal module ${(sizes.terminalGzip / 1024).toFixed(1)} KB gzip`);
