// Prints the suite's closing line, "N passed, N failed[, N skipped]", from vitest's JSON report,
// and fails when the report is missing or counted no test (a run that tested nothing is no pass).
import { readFileSync } from "node:fs";

const file = process.argv[2];
let report;
try {
  report = JSON.parse(readFileSync(file, "utf8"));
} catch (error) {
  console.error(`summary: cannot read ${file}: ${error.message}`);
  process.exit(1);
}
const passed = report.numPassedTests ?? 0;
// A file that failed without a failing test (an import error, a failing hook) counts once; a
// file whose tests failed is already counted by its tests.
const brokenFiles = (report.testResults ?? []).filter(
  (f) => f.status === "failed" && !(f.assertionResults ?? []).some((t) => t.status === "failed"),
).length;
const failed = (report.numFailedTests ?? 0) + brokenFiles;
const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
