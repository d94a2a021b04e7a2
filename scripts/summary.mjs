// Prints the suite's closing line, "N passed, N failed[, N skipped]", summed over vitest's JSON
// reports (the main run and each Node line's, scripts/node-lines.sh), and fails when a report is
// missing or one counted no test (a run that tested nothing is no pass).
import { readFileSync } from "node:fs";

const files = process.argv.slice(2);
const total = { passed: 0, failed: 0, skipped: 0 };
let ok = files.length > 0;
for (const file of files) {
  let report;
  try {
    report = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    console.error(`summary: cannot read ${file}: ${error.message}`);
    ok = false;
    continue;
  }
  const passed = report.numPassedTests ?? 0;
  // A file that failed without a failing test (an import error, a failing hook) counts once; a
  // file whose tests failed is already counted by its tests.
  const brokenFiles = (report.testResults ?? []).filter(
    (f) => f.status === "failed" && !(f.assertionResults ?? []).some((t) => t.status === "failed"),
  ).length;
  const failed = (report.numFailedTests ?? 0) + brokenFiles;
  const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  if (files.length > 1)
    console.log(`${file}: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
  if (passed === 0) ok = false;
  total.passed += passed;
  total.failed += failed;
  total.skipped += skipped;
}
const { passed, failed, skipped } = total;
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
process.exit(failed > 0 || !ok ? 1 : 0);
