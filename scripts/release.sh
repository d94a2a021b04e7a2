#!/bin/sh
# `pnpm release`: build, check, then publish every workspace package whose version is not on the
# registry yet (changesets publish: one `pnpm publish` per package, `workspace:` ranges rewritten,
# a git tag per published package). Versions come from an earlier `pnpm changeset version` commit;
# see docs/releasing.md.
#
#   pnpm release              build, typecheck, publint + attw, unit tests, publish
#   pnpm release --no-test    skip the unit tests (when the same commit already passed `pnpm test`)
#   pnpm release --check      everything but publishing
#
# The registry is whatever npm/pnpm are configured with (an .npmrc `registry=` / `@jobrt:registry=`
# line, or NPM_CONFIG_REGISTRY); it is printed first. Credentials belong in a user-level npmrc
# (NPM_CONFIG_USERCONFIG), never in the repository's .npmrc.
set -eu
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1

run_tests=yes
publish=yes
for arg in "$@"; do
  case $arg in
    --no-test) run_tests=no ;;
    --check) publish=no ;;
    *) echo "release: unknown option $arg (use --no-test or --check)" >&2; exit 2 ;;
  esac
done

if [ "$publish" = yes ] && ! git diff --quiet HEAD --; then
  echo "release: the work tree has uncommitted changes; commit the 'Version packages' change first" >&2
  exit 1
fi
if ls .changeset/*.md >/dev/null 2>&1 && [ "$(ls .changeset/*.md | grep -v README.md | wc -l)" -gt 0 ]; then
  echo "release: .changeset/ still holds changesets; run 'pnpm changeset version' and commit first" >&2
  exit 1
fi

registry=$(npm config get registry)
scoped=$(npm config get @jobrt:registry)
[ "$scoped" = undefined ] && scoped=$registry
echo "release: registry $registry (@jobrt: $scoped)" >&2

pnpm exec turbo run build --output-logs=errors-only
pnpm exec turbo run typecheck lint:pkg --output-logs=errors-only
if [ "$run_tests" = yes ]; then
  pnpm exec turbo run test --output-logs=errors-only
fi
[ "$publish" = yes ] || { echo "release: checks passed; not publishing (--check)" >&2; exit 0; }
pnpm exec changeset publish
