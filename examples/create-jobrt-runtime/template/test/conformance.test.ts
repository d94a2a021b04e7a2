import { describeRuntimeConformance } from "@jobrt/testkit";

describeRuntimeConformance(() => import("../src/index.js"), {
  type: "__TYPE__",
  capabilities: { runs: "exec-spec" },
  invalid: [{ title: "a container request", container: { value: "/some/image" }, code: "ERR_CONTAINER_REQUEST" }],
});
