#!/usr/bin/env node
// Writes jobrt(1) and jobrt.conf(5) into packages/cli/dist/man, run by @jobrt/cli's build.
// jobrt(1) is the help texts themselves (dist/help.js: MAIN_HELP and COMMAND_HELP, what --help
// prints), so a command or option added to a help text is in the man page with no other edit.
// jobrt.conf(5) is the key tables of docs/cli.md (jobrt.conf) and docs/runtime-oci.md (oci.conf,
// images.conf): the reference the docs give, in the package. tests/cli/man.test.ts checks both
// against --help and the conf schemas.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const cli = join(root, "packages/cli");
const { version } = JSON.parse(readFileSync(join(cli, "package.json"), "utf8"));
const { MAIN_HELP, COMMAND_HELP } = await import(join(cli, "dist/help.js"));

/** Text as roff sees it: a backslash and a minus escaped, a line starting with . or ' guarded. */
function roff(text) {
  return text
    .replaceAll("\\", "\\e")
    .replaceAll("-", "\\-")
    .split("\n")
    .map((line) => (/^[.']/.test(line) ? `\\&${line}` : line))
    .join("\n")
    .replace(/[^\x00-\x7f]/gu, (c) => `\\[u${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}]`);
}

/** A help text as a no-fill block, indented as --help prints it. */
const verbatim = (text) => `.nf\n${roff(text.trimEnd())}\n.fi\n`;

function manual1() {
  const [usageLine, , summary] = MAIN_HELP.split("\n");
  const description = MAIN_HELP.split("\n").slice(2).join("\n");
  const commands = Object.entries(COMMAND_HELP).map(([name, help]) => `.SS ${name}\n${verbatim(help)}`);
  return `.TH JOBRT 1 "" "jobrt ${version}" "User Commands"
.nh
.ad l
.SH NAME
jobrt \\- ${roff(summary.replace(/\.$/, "").replace(/^Run/, "run"))}
.SH SYNOPSIS
${roff(usageLine.replace(/^Usage: /, ""))}
.SH DESCRIPTION
${verbatim(description)}.SH COMMANDS
Each command's help, as \\fBjobrt help\\fR \\fICOMMAND\\fR and \\fBjobrt\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR print it.
${commands.join("")}.SH FILES
.TP
/etc/jobrt/jobrt.conf, oci.conf, shifter.conf, images.conf
the configuration (see \\fBjobrt.conf\\fR(5)); another directory with \\fB\\-\\-conf\\-dir\\fR, \\fBJOBRT_CONF_DIR\\fR or jobrt.confdir
.SH SEE ALSO
\\fBjobrt.conf\\fR(5), \\fBsrun\\fR(1), \\fBoci.conf\\fR(5)
`;
}

/** Markdown inline text as roff: `code` bold, links as their text. */
function inline(md) {
  return roff(
    md
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .replace(/\*\*([^*]*)\*\*/g, "$1")
      .replaceAll("\\|", "|"),
  ).replace(/`([^`]*)`/g, "\\fB$1\\fR");
}

/** The rows of the first key table after `heading` in a docs file: [key cell, other cells...]. */
function keyTable(file, heading) {
  const text = readFileSync(join(root, "docs", file), "utf8");
  const start = text.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`docs/${file}: no heading ${JSON.stringify(heading)}`);
  const lines = text.slice(start).split("\n");
  const first = lines.findIndex((line) => line.startsWith("| "));
  const rows = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(
      line
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((cell) => cell.trim()),
    );
  }
  return {
    header: lines[first]
      .slice(1, -1)
      .split("|")
      .map((c) => c.trim()),
    rows,
  };
}

function keySection(title, intro, table) {
  const entries = table.rows.map(([key, ...rest]) => {
    const described = rest.map((cell, i) =>
      table.header[i + 1] === "meaning"
        ? inline(cell)
        : `${table.header[i + 1]}: ${inline(cell)}${cell.endsWith(".") ? "" : "."}`,
    );
    return `.TP\n${inline(key)}\n${described.join("\n")}\n`;
  });
  return `.SH ${title}\n${intro}\n${entries.join("")}`;
}

function manual5() {
  return `.TH JOBRT.CONF 5 "" "jobrt ${version}" "File Formats"
.nh
.ad l
.SH NAME
jobrt.conf, oci.conf, images.conf \\- jobrt's configuration files
.SH DESCRIPTION
jobrt reads its configuration from one directory: \\fB\\-\\-conf\\-dir\\fR, else \\fBJOBRT_CONF_DIR\\fR, else the directory
named in the file jobrt.confdir beside the install's node_modules (only when it and its directory are root's and
nobody else may write them), else /etc/jobrt.
Every file is in Slurm's syntax: one \\fIKey\\fR=\\fIValue\\fR a line, keys in any case, # comments, double quotes and
backslash escapes; an error names file:line:column and jobrt exits 2. A missing file means the embedded defaults.
${keySection("JOBRT.CONF", "The node's jobrt settings.", keyTable("cli.md", "## jobrt.conf"))}${keySection("OCI.CONF", "Runtime oci: how containers are run (Slurm's oci.conf keys).", keyTable("runtime-oci.md", "## Configuration reference (oci.conf)"))}${keySection("IMAGES.CONF", "Runtime oci: the node's image cache (\\fB\\-\\-container\\-image\\fR).", keyTable("runtime-oci.md", "### images.conf"))}.SH SEE ALSO
\\fBjobrt\\fR(1), \\fBoci.conf\\fR(5)
`;
}

const out = join(cli, "dist/man");
mkdirSync(out, { recursive: true });
writeFileSync(join(out, "jobrt.1"), manual1());
writeFileSync(join(out, "jobrt.conf.5"), manual5());
