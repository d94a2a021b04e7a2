#!/bin/sh
# The Node LTS lines sites run besides the one the suite ran on (package.json's engines): each
# line's node from the npm registry (the node-linux-<arch> package, the only network CI has), then
# every package's unit tests and a smoke of the CLI (jobrt run, the code cache, images, jobrt exec
# under the local Slurm) under it. Tests start jobrt with process.execPath, so all of a cell's
# jobrt processes run on the line under test. Reports: test-results/vitest-node<line>-*.json.
set -eu
cd "$(dirname "$0")/.."
lines=${JOBRT_NODE_LINES:-22 24}
arch=$(node -p process.arch)
units="--project core --project host-services --project launcher --project cli --project runtime-none --project runtime-oci --project runtime-shifter --project images --project testkit"
smoke="tests/cli/run.test.ts tests/cli/codecache.test.ts tests/images/images.test.ts tests/slurm/jobrtexec.test.ts"
mkdir -p test-results .cache/node-lines
# slurmd and job users run the line's node from here: every component must be theirs to read.
chmod 755 .cache .cache/node-lines
status=0
for line in $lines; do
  dir=.cache/node-lines/$line
  if [ ! -x "$dir/bin/node" ]; then
    rm -rf "$dir" "$dir.part" && mkdir -p "$dir.part"
    tgz=$(cd "$dir.part" && npm pack --silent "node-linux-$arch@$line")
    tar -xzf "$dir.part/$tgz" -C "$dir.part" package/bin/node
    mv "$dir.part/package" "$dir" && rm -rf "$dir.part"
  fi
  node=$PWD/$dir/bin/node
  echo "node-lines: Node $("$node" --version) ($dir)" >&2
  # $units and $smoke are word lists on purpose: unquoted.
  PATH="$PWD/$dir/bin:$PATH" "$node" node_modules/vitest/vitest.mjs run $units \
    --reporter=default --reporter=json --outputFile.json="test-results/vitest-node$line-units.json" || status=1
  PATH="$PWD/$dir/bin:$PATH" "$node" node_modules/vitest/vitest.mjs run --project e2e $smoke \
    --reporter=default --reporter=json --outputFile.json="test-results/vitest-node$line-smoke.json" || status=1
done
exit $status
