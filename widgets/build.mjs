// Builds the browser side of minigrad's widgets into ../minigrad/widgets/static/ (git-ignored).
//
//   viz.js          the layout-engine widget's ESM: Graphviz (@viz-js/viz, WebAssembly) as an
//                   embedded worker script plus the small loader (src/layout/start-graphviz.js)
//   graph.js        GraphView        (anywidget ESM, no Graphviz inside)
//   stepper.js      BackwardStepper  (anywidget ESM, no Graphviz inside)
//   memory.js       MemoryView       (anywidget ESM, no Graphviz inside)
//   tape.js         TapeView         (anywidget ESM, no Graphviz inside)
//   aot.js          AotView          (anywidget ESM, no Graphviz inside)
//   standalone.js   classic script for the self-contained HTML export: the engine and the three
//                   views, window.minigrad.mount(el, {widget, trace, dot, options})
//   standalone-tape.js  the same for a TapeView alone (no Graphviz: a tape has no graph)
//   standalone.css  the same styles as a file (the scripts also inject them)
//   THIRD_PARTY_LICENSES.txt  Viz.js (MIT), Graphviz (EPL-1.0), Expat (MIT)
//   ../widgets/build/graphviz-worker.js  the Graphviz worker script alone, for test/graphviz-worker.test.js
//
// Usage: node build.mjs [--dev]   (--dev: no minification)
import * as esbuild from "esbuild";
import { readFileSync, writeFileSync, mkdirSync, statSync, rmSync, readdirSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { fileURLToPath } from "node:url";
import path from "node:path";
import vm from "node:vm";

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = path.resolve(here, "../minigrad/widgets/static");
const dev = process.argv.includes("--dev");
const pkg = JSON.parse(readFileSync(path.join(here, "package.json"), "utf8"));
const vizPkg = JSON.parse(readFileSync(path.join(here, "node_modules/@viz-js/viz/package.json"), "utf8"));

const common = {
  bundle: true,
  minify: !dev,
  charset: "utf8",
  target: ["es2020", "chrome90", "firefox90", "safari15"],
  legalComments: "eof",
  logLevel: "warning",
  loader: { ".css": "text" },
  define: {
    __MINIGRAD_WIDGETS_VERSION__: JSON.stringify(pkg.version),
    __GRAPHVIZ_NOTICE__: JSON.stringify(`Graphviz via @viz-js/viz ${vizPkg.version}`),
  },
  absWorkingDir: here,
};

// ---------------------------------------------------------------------------------------------
// @viz-js/viz inlines its WebAssembly as a JavaScript string of raw bytes (emscripten's
// SINGLE_FILE binary encoding): 920 kB of characters, 45% of them control characters, which
// JSON (the comm that carries an anywidget ESM) escapes as six bytes each. Re-encode it as
// gzip + base64 (ASCII, a third of the size) and inflate it with DecompressionStream before
// Graphviz starts (src/layout/graphviz-worker.js calls prepareWasm()).
const WASM_OPEN = "function findWasmBinary(){return binaryDecode('";
const extracted = new Map(); // file -> {patched, base64}
let wasmBase64 = null;

/**
 * Read a file of @viz-js/viz that inlines the WebAssembly (dist/viz.js, which the package
 * exports, or lib/backend.js): the file with the wasm swapped for a call, and the wasm gzipped.
 */
function extractWasm(file) {
  if (extracted.has(file)) return extracted.get(file);
  const source = readFileSync(file, "utf8");
  const start = source.indexOf(WASM_OPEN);
  const end = start < 0 ? -1 : source.indexOf("')}", start + WASM_OPEN.length);
  if (start < 0 || end < 0) {
    throw new Error(
      `@viz-js/viz ${vizPkg.version}: the inlined WebAssembly was not found in ${file}; ` +
        `build.mjs knows the layout of 3.31.0 (package.json pins it).`,
    );
  }
  const literal = source.slice(start + WASM_OPEN.length - 1, end + 1); // '...'
  const text = vm.runInNewContext(literal); // the string literal, unescaped
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i) & 0xff;
  if (bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) {
    throw new Error("@viz-js/viz: the inlined string is not a WebAssembly module");
  }
  const patched =
    'import { wasmBinary as __mgWasmBinary } from "minigrad:wasm";\n' +
    source.slice(0, start) +
    "function findWasmBinary(){return __mgWasmBinary()}" +
    source.slice(end + 3);
  const base64 = gzipSync(bytes, { level: 9 }).toString("base64");
  if (wasmBase64 !== null && wasmBase64 !== base64) throw new Error("@viz-js/viz: two different WebAssembly modules");
  wasmBase64 = base64;
  const result = { patched, base64, wasmBytes: bytes.length };
  extracted.set(file, result);
  return result;
}

const VIZ_DIST = path.join(here, "node_modules/@viz-js/viz/dist/viz.js");

function wasmPlugin() {
  return {
    name: "viz-wasm",
    setup(build) {
      build.onLoad({ filter: /[\\/]@viz-js[\\/]viz[\\/](dist[\\/]viz|lib[\\/]backend)\.js$/ }, (args) => ({
        contents: extractWasm(args.path).patched,
        loader: "js",
      }));
      build.onResolve({ filter: /^minigrad:wasm$/ }, (args) => ({ path: args.path, namespace: "minigrad-wasm" }));
      build.onLoad({ filter: /.*/, namespace: "minigrad-wasm" }, () => ({
        contents: `
let bytes = null;
const GZ = ${JSON.stringify(wasmBase64 ?? extractWasm(VIZ_DIST).base64)};
export async function prepareWasm() {
  if (bytes) return;
  if (typeof DecompressionStream === "undefined") {
    throw new Error("this browser has no DecompressionStream (needed to unpack Graphviz)");
  }
  const raw = atob(GZ);
  const packed = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) packed[i] = raw.charCodeAt(i);
  const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("gzip"));
  bytes = new Uint8Array(await new Response(stream).arrayBuffer());
}
export function wasmBinary() {
  if (!bytes) throw new Error("prepareWasm() must run before Graphviz starts");
  return bytes;
}`,
        loader: "js",
      }));
    },
  };
}

function textModulePlugin(specifier, text) {
  const filter = new RegExp(`^${specifier.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`);
  return {
    name: `text:${specifier}`,
    setup(build) {
      build.onResolve({ filter }, (args) => ({ path: args.path, namespace: "minigrad-text" }));
      build.onLoad({ filter: /.*/, namespace: "minigrad-text" }, () => ({ contents: text, loader: "text" }));
    },
  };
}

async function bundle(options) {
  const result = await esbuild.build({ ...common, write: false, ...options });
  return result.outputFiles[0].text;
}

function write(name, text) {
  writeFileSync(path.join(outdir, name), text);
}

// 1. The Graphviz backend, as one classic script (runs in a worker or on the page).
const backendSource = await bundle({
  entryPoints: ["src/layout/graphviz-worker.js"],
  format: "iife",
  plugins: [wasmPlugin()],
  // emscripten reads import.meta.url only to find a separate .wasm file, which it never needs
  logOverride: { "empty-import-meta": "silent" },
});

// A copy for the unit tests (test/graphviz-worker.test.js runs it in Node); build/ is git-ignored.
mkdirSync(path.join(here, "build"), { recursive: true });
writeFileSync(path.join(here, "build/graphviz-worker.js"), backendSource);

// 2. Everything else. The bundles that contain Graphviz carry the licences with them (an HTML
// export holds standalone.js alone); the views carry a one-line notice.
const notices = readFileSync(path.join(here, "LICENSES.md"), "utf8");
if (notices.includes("*/")) throw new Error("LICENSES.md must not contain */");
const withLicences = { banner: { js: `/*! minigrad widgets ${pkg.version} (MIT)\n\n${notices}*/` } };
const ownNotice = { banner: { js: `/*! minigrad widgets ${pkg.version} (MIT); see THIRD_PARTY_LICENSES.txt for viz.js */` } };
rmSync(outdir, { recursive: true, force: true });
mkdirSync(outdir, { recursive: true });
const engineText = textModulePlugin("minigrad:graphviz-worker-source", backendSource);

write("viz.js", await bundle({ entryPoints: ["src/layout/layout-widget.js"], format: "esm", plugins: [engineText], ...withLicences }));
for (const [name, entry] of [
  ["graph.js", "src/views/graph-view.js"],
  ["stepper.js", "src/views/backward-stepper.js"],
  ["memory.js", "src/views/memory-view.js"],
  ["tape.js", "src/views/tape-view.js"],
  ["aot.js", "src/views/aot-view.js"],
]) {
  write(name, await bundle({ entryPoints: [entry], format: "esm", ...ownNotice }));
}
write("standalone.js", await bundle({ entryPoints: ["src/standalone/all-views.js"], format: "iife", plugins: [engineText], ...withLicences }));
write("standalone-tape.js", await bundle({ entryPoints: ["src/standalone/tape-view.js"], format: "iife", ...ownNotice }));
write("standalone.css", await bundle({ entryPoints: ["src/ui/styles.css"], loader: { ".css": "css" } }));

// 3. Licences of what the bundles contain, next to them (and so in the wheel).
write("THIRD_PARTY_LICENSES.txt", notices);

// 4. Sizes.
const views = ["graph.js", "stepper.js", "memory.js", "tape.js", "aot.js"];
console.log(`minigrad widgets ${pkg.version} -> ${path.relative(process.cwd(), outdir) || "."}`);
for (const name of readdirSync(outdir).sort()) {
  const bytes = statSync(path.join(outdir, name)).size;
  const json = JSON.stringify(readFileSync(path.join(outdir, name), "utf8")).length;
  console.log(`  ${name.padEnd(26)} ${(bytes / 1024).toFixed(1).padStart(8)} KiB  (as a JSON string: ${(json / 1024).toFixed(1)} KiB)`);
}
const biggestView = Math.max(...views.map((n) => statSync(path.join(outdir, n)).size));
if (biggestView > 150 * 1024) {
  console.error(`a view bundle is ${(biggestView / 1024).toFixed(1)} KiB: over the 150 KiB budget`);
  process.exit(1);
}
