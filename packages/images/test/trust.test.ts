import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import { parseImageReference } from "../src/reference.js";
import { loadImageSettings } from "../src/settings.js";
import { type TrustPolicy, loadTrustPolicy, policyScopes, trustDecision } from "../src/trust.js";

const D = `sha256:${"ab".repeat(32)}`;
const ref = (t: string) => parseImageReference(t);
const signed = [{ type: "signedBy", keyType: "GPGKeys", keyPath: "/etc/jobrt/keys/site.gpg" }];

describe("the trust decision (containers-policy.json scopes)", () => {
  test("scopes, most specific first: the digest, the repository, its namespaces, the host, *.domain", () => {
    expect(policyScopes(ref("docker://registry.site.example:5000/team/app:1"), D)).toEqual({
      transport: "docker",
      scopes: [
        `registry.site.example:5000/team/app@${D}`,
        "registry.site.example:5000/team/app",
        "registry.site.example:5000/team",
        "registry.site.example:5000",
        "*.site.example",
        "*.example",
      ],
    });
    // Docker Hub's one-component names are under library/, as containers/image normalises them.
    expect(policyScopes(ref("docker://docker.io/ubuntu:22.04"), D).scopes.slice(0, 3)).toEqual([
      `docker.io/library/ubuntu@${D}`,
      "docker.io/library/ubuntu",
      "docker.io/library",
    ]);
    expect(policyScopes(ref("oci:/srv/images/app:v1"), D)).toEqual({
      transport: "oci",
      scopes: ["/srv/images/app:v1", "/srv/images/app", "/srv/images", "/srv"],
    });
  });

  test("the most specific scope decides: allowed namespaces, a refused registry, signatures left to verify", () => {
    const policy: TrustPolicy = {
      file: "/etc/jobrt/policy.json",
      default: [{ type: "reject" }],
      transports: {
        docker: {
          "docker.io/library": [{ type: "insecureAcceptAnything" }],
          "registry.site.example": signed,
          "registry.site.example/scratch": [{ type: "insecureAcceptAnything" }],
          "*.untrusted.example": [{ type: "reject" }],
        },
      },
    };
    expect(trustDecision(ref("docker://docker.io/library/ubuntu:22.04"), D, policy)).toEqual({
      verdict: "allow",
      scope: 'transports.docker."docker.io/library"',
    });
    expect(trustDecision(ref("docker://docker.io/evil/ubuntu:22.04"), D, policy)).toMatchObject({
      verdict: "deny",
      scope: "default",
      requirement: "reject",
    });
    expect(trustDecision(ref("docker://registry.site.example/team/app:1"), D, policy)).toEqual({
      verdict: "verify",
      scope: 'transports.docker."registry.site.example"',
      requirements: signed,
    });
    expect(trustDecision(ref("docker://registry.site.example/scratch/x:1"), D, policy).verdict).toBe("allow");
    expect(trustDecision(ref("docker://a.untrusted.example/x:1"), D, policy)).toMatchObject({
      verdict: "deny",
      scope: 'transports.docker."*.untrusted.example"',
    });
    // A transport-wide "" scope comes before the global default.
    const local: TrustPolicy = {
      file: "p",
      default: [{ type: "reject" }],
      transports: { oci: { "": [{ type: "insecureAcceptAnything" }] } },
    };
    expect(trustDecision(ref("oci:/srv/app"), D, local)).toEqual({ verdict: "allow", scope: 'transports.oci.""' });
  });

  test("images.conf names the policy and registries.d; the system's files by default; relative paths refused", () => {
    const dir = tempDir();
    expect(loadImageSettings(dir)).toMatchObject({
      trustPolicy: "/etc/containers/policy.json",
      trustRegistriesDir: "/etc/containers/registries.d",
    });
    writeFileSync(
      join(dir, "images.conf"),
      "TrustPolicy=/etc/jobrt/policy.json\nTrustRegistriesDir=/etc/jobrt/registries.d\n",
    );
    expect(loadImageSettings(dir)).toMatchObject({
      trustPolicy: "/etc/jobrt/policy.json",
      trustRegistriesDir: "/etc/jobrt/registries.d",
    });
    writeFileSync(join(dir, "images.conf"), "TrustPolicy=policy.json\n");
    expect(() => loadImageSettings(dir)).toThrow(/images\.conf:1.*TrustPolicy.*"policy\.json" is not an absolute path/);
  });

  test("a policy file that is missing or not JSON is an ERR_CONF naming it and the key", () => {
    const dir = tempDir();
    const file = join(dir, "policy.json");
    writeFileSync(join(dir, "images.conf"), `TrustPolicy=${file}\n`);
    const settings = loadImageSettings(dir);
    expect(() => loadTrustPolicy(settings)).toThrow(
      expect.objectContaining({
        code: "ERR_CONF",
        message: expect.stringMatching(new RegExp(`${file}.*TrustPolicy in ${dir}/images\\.conf.*ENOENT`)),
      }),
    );
    writeFileSync(file, "{ not json");
    expect(() => loadTrustPolicy(settings)).toThrow(
      expect.objectContaining({ code: "ERR_CONF", message: expect.stringContaining(file) }),
    );
  });
});
