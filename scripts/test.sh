#!/bin/sh
# The whole test suite: system packages (as root), set-up, type checks, lint, package checks,
# then every vitest project (unit tests, the testkit against each runtime, end-to-end tests with
# real runc, Slurm, verdaccio, ch-run and the Shifter stand-in). Ends with "N passed, N failed".
set -eu
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1
sh scripts/system-deps.sh
sh scripts/setup.sh
pnpm exec turbo run typecheck lint:pkg --output-logs=errors-only
node scripts/errors-doc.mjs --check
node scripts/api-list.mjs --check
pnpm exec knip --no-progress
pnpm exec tsc -p tests/tsconfig.json
pnpm exec biome lint --diagnostic-level=error .
mkdir -p test-results
status=0
pnpm exec vitest run --reporter=default --reporter=json --outputFile.json=test-results/vitest.json || status=$?
node scripts/summary.mjs test-results/vitest.json || status=1
exit $status
