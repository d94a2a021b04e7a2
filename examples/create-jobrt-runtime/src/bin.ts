#!/usr/bin/env node
import { parseArgs } from "node:util";
import { isJobrtError } from "@jobrt/core";
import { createRuntimeProject } from "./create.js";

const USAGE = `Usage: create-jobrt-runtime <dir> [--name NAME]
       npm create jobrt-runtime <dir> -- [--name NAME]    pnpm create jobrt-runtime <dir> [--name NAME]

Creates a jobrt runtime package in <dir> (new or empty) that passes @jobrt/testkit out of the box.
NAME is what sites pass to --runtime: "x" (package jobrt-runtime-x) or "@scope/x"
(package @scope/jobrt-runtime-x). Default: <dir>'s name without a jobrt-runtime- prefix.
A runtime a site installs from its own registry should be scoped: "@your-org/x".
`;

function main(argv: string[]): number {
  let parsed: ReturnType<
    typeof parseArgs<{
      options: { name: { type: "string" }; help: { type: "boolean"; short: "h" } };
      allowPositionals: true;
    }>
  >;
  try {
    parsed = parseArgs({
      args: argv,
      options: { name: { type: "string" }, help: { type: "boolean", short: "h" } },
      allowPositionals: true,
    });
  } catch (error) {
    process.stderr.write(`create-jobrt-runtime: ${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  if (parsed.values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (parsed.positionals.length !== 1) {
    process.stderr.write(`create-jobrt-runtime: give exactly one directory\n${USAGE}`);
    return 2;
  }
  try {
    const created = createRuntimeProject({
      dir: parsed.positionals[0] as string,
      ...(parsed.values.name ? { name: parsed.values.name } : {}),
    });
    process.stdout.write(
      `Created ${created.packageName} (--runtime ${created.name}) in ${created.dir}\n\n  cd ${created.dir}\n  npm install\n  npm test\n  npm publish\n`,
    );
    // An unscoped name is a dependency-confusion target: a site's `@scope:registry=` line routes a
    // scope, so npm looks an unscoped name up on the public registry (docs/site.md).
    if (!created.packageName.startsWith("@")) {
      process.stderr.write(
        `create-jobrt-runtime: note: ${created.packageName} is unscoped; a site installing it from its own registry gets it from the public one, where anyone may publish that name: prefer a scoped name, --name @your-org/${created.name}\n`,
      );
    }
    return 0;
  } catch (error) {
    if (!isJobrtError(error)) throw error;
    process.stderr.write(`create-jobrt-runtime: ${error.message}\n`);
    return 2;
  }
}

process.exitCode = main(process.argv.slice(2));
