import { fileURLToPath } from "node:url";

/** prctl(2)'s syscall number per Node architecture (perl's syscall() needs the number). */
const PRCTL_NR: Partial<Record<string, number>> = { x64: 157, arm64: 167, riscv64: 167, loong64: 167, ppc64: 171, s390x: 172, ia32: 172, arm: 172 };
const PR_SET_CHILD_SUBREAPER = 36;

/** The supervisor program, from either src/ (tests) or dist/. */
export const SUPERVISOR_PROGRAM = fileURLToPath(new URL("../dist/supervisor-main.js", import.meta.url));

/**
 * argv that makes the following program a child subreaper and execs it. Node has no prctl, so a
 * one-line perl (Debian's perl-base is Essential) sets the flag, which survives execve, and tells
 * the program through JOBRT_OCI_SUBREAPER whether it worked. Undefined without perl or on an
 * architecture whose prctl number is not listed.
 */
export function subreaperPrefix(perl: string | undefined, arch: string = process.arch): string[] | undefined {
  const nr = PRCTL_NR[arch];
  if (perl === undefined || nr === undefined) return undefined;
  const script = `$ENV{JOBRT_OCI_SUBREAPER} = syscall(${nr}, ${PR_SET_CHILD_SUBREAPER}, 1, 0, 0, 0) == 0 ? 1 : 0; exec { $ARGV[0] } @ARGV; die "jobrt-oci: cannot run $ARGV[0]: $!\\n";`;
  return [perl, "-e", script, "--"];
}
