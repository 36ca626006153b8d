// The folders of src/ are layers (README.md, "The sources, by layer"): a file imports only from
// its own folder and the folders listed before it, so that, say, the trace replay never reaches
// for the DOM and a view's parts never reach into another view's bundle entry.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const LAYERS = ["text", "trace", "layout", "ui", "views", "standalone"];
const src = fileURLToPath(new URL("../src/", import.meta.url));

/** Every file under src/ as "folder/name", and the relative specifiers it imports. */
function sources() {
  const found = [];
  const walk = (folder) => {
    for (const entry of readdirSync(path.join(src, folder), { withFileTypes: true })) {
      const file = folder ? `${folder}/${entry.name}` : entry.name;
      if (entry.isDirectory()) walk(file);
      else {
        const text = readFileSync(path.join(src, file), "utf8");
        const specifiers = [...text.matchAll(/^import\s[^;]*?from\s+"(\.[^"]+)"/gms)].map((m) => m[1]);
        found.push({ file, specifiers });
      }
    }
  };
  walk("");  // (by hand: readdirSync's `recursive` needs Node 20, package.json allows 18)
  return found;
}

test("every file of src/ lives in a layer folder", () => {
  for (const { file } of sources()) assert.ok(LAYERS.includes(file.split("/")[0]) && file.split("/").length === 2, file);
});

test("a file imports only from its own layer and the layers before it", () => {
  let imports = 0;
  for (const { file, specifiers } of sources()) {
    const from = LAYERS.indexOf(file.split("/")[0]);
    for (const spec of specifiers) {
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec));
      const to = LAYERS.indexOf(target.split("/")[0]);
      assert.ok(to >= 0 && to <= from, `${file} imports ${target}: ${LAYERS[from]}/ may import only from ${LAYERS.slice(0, from + 1).join("/, ")}/`);
      imports++;
    }
  }
  assert.ok(imports > 40, `only ${imports} imports found: the pattern no longer reads this code`);
});
