#!/bin/sh
# The whole test suite: system packages (as root), set-up, type checks, lint, package checks,
# then every vitest project (unit tests, the testkit against each runtime, end-to-end tests with
# real runc, Slurm, verdaccio, ch-run and the Shifter stand-in), then the unit tests and a smoke of
# the CLI under the other Node LTS lines (scripts/node-lines.sh). Ends with "N passed, N failed".
set -eu
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1
sh scripts/system-deps.sh
sh scripts/setup.sh
pnpm exec turbo run typecheck lint:pkg --output-logs=errors-only
node scripts/errors-doc.mjs --check
node scripts/spank-options.mjs --check
node scripts/api-list.mjs --check
node scripts/api-compat.mjs
pnpm exec knip --no-progress
pnpm exec tsc -p tests/tsconfig.json
pnpm exec biome check --diagnostic-level=error .
mkdir -p test-results
status=0
rm -f test-results/vitest*.json
pnpm exec vitest run --reporter=default --reporter=json --outputFile.json=test-results/vitest.json || status=$?
sh scripts/node-lines.sh || status=1
node scripts/summary.mjs test-results/vitest*.json || status=1
exit $status
