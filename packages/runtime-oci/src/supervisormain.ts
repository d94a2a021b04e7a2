/** Entry point of the create/start supervisor: `node supervisor.js '<SupervisorSpec JSON>'`. */
import { SUPERVISOR_FAILURE, type SupervisorSpec, supervise } from "./supervisor.js";

try {
  const spec = JSON.parse(process.argv[2] ?? "") as SupervisorSpec;
  await supervise(spec);
} catch (error) {
  process.stderr.write(`jobrt-oci: supervisor failed: ${(error as Error).message}\n`);
  process.exit(SUPERVISOR_FAILURE);
}
