#!/bin/sh
# Shared set-up for the README's two commands: pnpm at the pinned version, dependencies, build.
# Safe to run again; a second run takes a second or two (turbo's cache).
set -eu
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1
pin=$(node -p 'require("./package.json").packageManager.split("@")[1]')
if [ "$(pnpm --version 2>/dev/null || true)" != "$pin" ]; then
  echo "setup: installing pnpm $pin (npm i -g)" >&2
  npm i -g "pnpm@$pin" --allow-scripts=pnpm >/dev/null
fi
pnpm install --frozen-lockfile --reporter=silent
pnpm exec turbo run build --output-logs=errors-only
