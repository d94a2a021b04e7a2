#!/bin/sh
# `pnpm release`: build, check, then publish every workspace package whose version is not on the
# registry yet (changesets publish: one `pnpm publish` per package, `workspace:` ranges rewritten,
# a git tag per published package). Versions come from an earlier `pnpm changeset version` commit;
# see docs/releasing.md.
#
#   pnpm release              build, typecheck, publint + attw, unit tests, publish
#   pnpm release --no-test    skip the unit tests (when the same commit already passed `pnpm test`)
#   pnpm release --check      everything but publishing
#   pnpm release --local      build, then publish what the next release will be (the tree with its
#                             pending changesets versioned, in a throw-away copy) to a registry on
#                             loopback (scripts/local-registry.mjs), for trying jobrt before a
#                             release; the registry keeps running. `--local-stop` stops it.
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
    --local) publish=local ;;
    --local-stop) exec node scripts/local-registry.mjs stop ;;
    *) echo "release: unknown option $arg (use --no-test, --check, --local or --local-stop)" >&2; exit 2 ;;
  esac
done

if [ "$publish" = local ]; then
  # Not a release: no tags, no clean-tree rule. What it publishes is what the next release will be:
  # the working tree with its pending changesets versioned (`changeset version`), in a copy that is
  # thrown away, so nothing in this tree changes and nothing is committed. Real version numbers, no
  # prerelease suffix: `^2.0.0` does not match 2.1.0-x, so every plugin's peer range would miss it.
  pnpm exec turbo run build --output-logs=errors-only
  stage=$(mktemp -d "${TMPDIR:-/tmp}/jobrt-local-release.XXXXXX")
  trap 'rm -rf "$stage"' EXIT
  # The tree with its build, without installed dependencies (the copy installs its own, offline).
  tar -cf - --exclude=node_modules --exclude=.git --exclude=.turbo --exclude=.cache --exclude=./tmp \
    --exclude=./test-results . | tar -xf - -C "$stage"
  (cd "$stage" && pnpm install --offline --frozen-lockfile --reporter=silent && pnpm exec changeset version >&2)
  # What the version step does by hand: a plugin that uses core API newer than the last release
  # gets a peer range that requires the core being published (scripts/peer-floor.mjs).
  node scripts/peer-floor.mjs --root "$stage" --fix >&2
  url=$(node scripts/local-registry.mjs start)
  npmrc=$(node scripts/local-registry.mjs status | sed -n 's/.*, npmrc //p')
  # Only this registry: every inherited npm/pnpm setting is dropped for the publish.
  for v in $(env | sed -n 's/^\([Nn][Pp][Mm]_[Cc][Oo][Nn][Ff][Ii][Gg]_[^=]*\)=.*/\1/p;s/^\(pnpm_config_[^=]*\)=.*/\1/p'); do unset "$v"; done
  (cd "$stage" && npm_config_userconfig=$npmrc pnpm -r --filter './packages/*' --filter './examples/*' publish \
    --no-git-checks --registry "$url" --reporter=silent)
  echo "release: published to $url, the pending changesets versioned (the next release):" >&2
  repo=$(pwd)
  (cd "$stage" && node "$repo/scripts/local-registry.mjs" list >&2)
  echo "release: try it (docs/writing-a-runtime.md, \"Before the first release\"):" >&2
  # A fresh npm cache: npm keeps a starter of the same version from an earlier --local (docs/writing-a-runtime.md).
  echo '  export npm_config_cache="$(mktemp -d)"' >&2
  echo "  npm create --yes --registry=$url jobrt-runtime jobrt-runtime-mine" >&2
  echo "  cd jobrt-runtime-mine && echo '@jobrt:registry=$url' > .npmrc && npm install && npm test" >&2
  echo "  stop the registry with: pnpm release --local-stop" >&2
  exit 0
fi

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
# api/released/ must be the API being published, recorded at `changeset version` (docs/releasing.md).
node scripts/api-compat.mjs --released
pnpm exec turbo run typecheck lint:pkg --output-logs=errors-only
if [ "$run_tests" = yes ]; then
  pnpm exec turbo run test --output-logs=errors-only
fi
[ "$publish" = yes ] || { echo "release: checks passed; not publishing (--check)" >&2; exit 0; }
pnpm exec changeset publish
