import { executableProblem } from "@jobrt/host-services";

/** Where Debian's perl-base (Essential) and a local build put perl; never looked up in a job's PATH. */
const PERLS = ["/usr/bin/perl", "/bin/perl", "/usr/local/bin/perl"];

/** The first executable perl of PERLS, or why there is none. */
export function findPerl(): { perl: string } | { missing: string } {
  for (const perl of PERLS) if (executableProblem(perl) === undefined) return { perl };
  return { missing: `no perl in ${PERLS.join(", ")}` };
}
