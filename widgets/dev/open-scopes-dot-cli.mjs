// For tests/test_refold.py (not a test file itself: it waits for stdin): read {trace, table, cases: [expanded, ...]} as JSON on stdin and
// print, for each case, what src/trace/open-scopes-dot.js draws ({dot, folding}), as JSON.
import { prepareScopes, refold } from "../src/trace/open-scopes-dot.js";

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const { trace, table, cases } = JSON.parse(input);
  const kit = prepareScopes(trace, table, table.style);
  process.stdout.write(JSON.stringify(kit === null ? null : cases.map((expanded) => refold(kit, expanded))));
});
