// Policy 4: secrets stay secret. The control token output, the gateway's MULTIENV_CONTROL_TOKEN and the
// AGENTENV_WEBSITE_SETTINGS of every site with secret settings must be Pulumi secrets, and no plaintext
// value anywhere may contain a value known to be secret.
//
// Where secret-ness can be judged: under Pulumi's mocks (`multienv check`) secret values keep their marker,
// so the rule checks the values themselves. CrossGuard unwraps every secret before a policy runs
// (@pulumi/policy deserializes with secrets unwrapped), so there the rule checks what it can see instead:
// a container that carries a secret must list "envs" in additionalSecretOutputs, which makes the engine
// treat the variable list as secret even if a wrapper were lost upstream.
//
// On a cluster the same secrets live in Secrets and reach a pod by reference: a pod's spec never holds the control
// token, a computer's token, a capture server's token or (on a server annotated multienv.secret-settings) the site's
// settings as env[].value, a Secret's data is secret-marked under the mocks, and keeps additionalSecretOutputs
// ["data", "stringData"] (what @pulumi/kubernetes gives it) where options are seen.
import { CONTROL_TOKEN_COMPONENT, CONTROL_TOKEN_OUTPUT, LABELS, OUTPUTS, ROLES, SECRET_ENV } from "../contract";
import {
  asRecord,
  containersOf,
  describe,
  envOf,
  labelsOf,
  metadataOf,
  ofType,
  podContainersOf,
  podEnvOf,
  podRoleOf,
  rawInput,
  roleOf,
  TYPES,
  type PolicyResource,
  type PolicyStack,
} from "../model";
import type { StackFinding, StackRule } from "../rule";
import { isSecretValue, REDACTED, stringLeaves, visitStrings } from "../secrets";

/** Shorter strings ("true", a port) would match everywhere; a secret worth the name is longer. */
const MIN_SECRET_LENGTH = 8;

/** The env variables of `container` that carry a secret, by the marks the components put on it. */
function secretEnvNames(container: PolicyResource): string[] {
  const names: string[] = [];
  if (roleOf(container) === ROLES.gateway) names.push(SECRET_ENV.controlToken);
  if (roleOf(container) === ROLES.siteProxy) names.push(SECRET_ENV.siteProxyToken);
  const settings = (labelsOf(container)[LABELS.secretSettings] ?? "").trim();
  if (settings !== "") names.push(SECRET_ENV.websiteSettings);
  return names;
}

/** The env variables of a pod that carry a secret: the tokens wherever they are set, and a marked server's settings. */
function podSecretEnvNames(pod: PolicyResource): string[] {
  const names: string[] = [SECRET_ENV.controlToken, SECRET_ENV.siteProxyToken, SECRET_ENV.captureServerToken];
  if ((metadataOf(pod).annotations[LABELS.secretSettings] ?? "").trim() !== "") names.push(SECRET_ENV.websiteSettings);
  return names;
}

/**
 * A pod spec is readable by whoever may read pods, and stays in the pod's state as it is: a secret it needs comes
 * from a Secret, by `valueFrom.secretKeyRef`, never as an `env[].value` (secret-marked or not).
 */
function podFindings(stack: PolicyStack): StackFinding[] {
  const findings: StackFinding[] = [];
  for (const pod of ofType(stack, TYPES.pod)) {
    const carried = podSecretEnvNames(pod);
    for (const container of podContainersOf(pod)) {
      for (const entry of podEnvOf(pod, container)) {
        const where = `${describe(pod)} container "${container.name}"`;
        if (carried.includes(entry.name)) {
          if (entry.hasValue)
            findings.push({
              resource: pod,
              message: `${where} sets ${entry.name} in its spec (env[].value); read it from a Secret with valueFrom.secretKeyRef`,
            });
          else if (entry.valueFrom !== undefined && entry.valueFrom.secretKeyRef === undefined)
            findings.push({
              resource: pod,
              message: `${where} reads ${entry.name} from ${Object.keys(entry.valueFrom).join(", ")}, not from a Secret; use valueFrom.secretKeyRef`,
            });
        } else if (stack.secretsVisible && entry.hasValue && entry.secretValue) {
          findings.push({
            resource: pod,
            message: `${where} puts a secret into its spec (${entry.name}, env[].value); keep it in a Secret and read it with valueFrom.secretKeyRef`,
          });
        }
      }
    }
  }
  for (const secret of ofType(stack, TYPES.kubernetesSecret)) {
    // In a preview a value built from a new resource's output is unknown: present all the same.
    const present = (["stringData", "data"] as const).filter((k) => rawInput(secret, k) !== undefined);
    if (present.length === 0)
      findings.push({
        resource: secret,
        message: `${describe(secret)} holds no stringData or data; give it the values the pods read from it`,
      });
    if (stack.secretsVisible) {
      for (const key of present) {
        const value = rawInput(secret, key);
        const plain = isSecretValue(value)
          ? []
          : Object.entries(asRecord(value))
              .filter(([, v]) => !isSecretValue(v))
              .map(([k]) => k);
        if (plain.length > 0 || (!isSecretValue(value) && typeof value !== "object"))
          findings.push({
            resource: secret,
            message: `${describe(secret)} ${key}${plain.length > 0 ? ` (${plain.join(", ")})` : ""} is plaintext; build it from pulumi.secret`,
          });
      }
    }
    const options = secret.additionalSecretOutputs;
    const missing = ["data", "stringData"].filter((k) => options !== undefined && !options.includes(k));
    if (missing.length > 0)
      findings.push({
        resource: secret,
        message: `${describe(secret)} does not list ${missing.map((k) => `"${k}"`).join(" and ")} in additionalSecretOutputs; keep the options @pulumi/kubernetes gives a Secret (additionalSecretOutputs: ["data", "stringData"])`,
      });
  }
  return findings;
}

/**
 * Every plaintext known to be secret: marked values (and the strings inside JSON or NAME=value ones), plus the
 * caller's.
 */
function knownSecretValues(stack: PolicyStack): Set<string> {
  const values = new Set<string>();
  const add = (text: string) => {
    if (text.length >= MIN_SECRET_LENGTH) values.add(text);
  };
  const addWithParts = (text: string) => {
    add(text);
    const eq = text.indexOf("=");
    const body = /^[A-Z_][A-Z0-9_]*=/.test(text) ? text.slice(eq + 1) : text;
    add(body);
    try {
      visitStrings(JSON.parse(body), (text) => add(text));
    } catch {
      // not JSON: the whole value is the secret
    }
  };
  for (const text of stack.knownSecrets ?? []) add(text);
  if (stack.secretsVisible) {
    // A graph that redacts secrets shows each one as exactly "[secret]"; the placeholder *inside* a longer
    // plaintext means a secret was turned into plaintext on the way (`multienv check` reads every secret
    // config value as "[secret]", so an unsecreted setting shows up this way).
    add(REDACTED);
    for (const resource of stack.resources) {
      visitStrings(resource.inputs, (text, secret) => secret && addWithParts(text));
    }
    visitStrings(stack.outputs ?? {}, (text, secret) => secret && addWithParts(text));
  }
  return values;
}

export const secretsStaySecret: StackRule = {
  kind: "stack",
  name: "secrets-stay-secret",
  description:
    `The controlToken and agentTokens outputs, the gateway's ${SECRET_ENV.controlToken}, each site proxy's ${SECRET_ENV.siteProxyToken} and the ${SECRET_ENV.websiteSettings} of every site with secret settings must be Pulumi secrets, and no plaintext value may contain a secret. ` +
    `To comply: build these values from pulumi.secret / config.requireSecret (never unsecret them), export controlToken and agentTokens as secrets, label a server whose site has secret settings with ${LABELS.secretSettings}, ` +
    `give every container that carries a secret additionalSecretOutputs: ["envs"], and the resource generating the control token additionalSecretOutputs: ["value"]. ` +
    `On a cluster: put ${SECRET_ENV.controlToken}, ${SECRET_ENV.siteProxyToken}, ${SECRET_ENV.captureServerToken} and the ${SECRET_ENV.websiteSettings} of a server annotated ${LABELS.secretSettings} into a Secret (stringData from pulumi.secret) and read them with valueFrom.secretKeyRef, never env[].value.`,
  check(stack) {
    const findings: StackFinding[] = [];
    const containers = containersOf(stack);

    for (const container of containers) {
      const carried = secretEnvNames(container);
      if (carried.length === 0) continue;
      // Under CrossGuard every value looks plaintext (and may be unknown in a preview): read envs only where marks
      // show.
      const env = stack.secretsVisible ? envOf(container) : [];
      for (const name of carried) {
        const entry = env.find((e) => e.name === name);
        if (entry !== undefined && !entry.secret) {
          findings.push({
            resource: container,
            message: `${describe(container)} sets ${name} in plaintext; build it from a Pulumi secret (pulumi.secret or config.requireSecret)`,
          });
        }
      }
      if (container.additionalSecretOutputs !== undefined && !container.additionalSecretOutputs.includes("envs")) {
        findings.push({
          resource: container,
          message: `${describe(container)} carries ${carried.join(" and ")} but does not list "envs" in additionalSecretOutputs; add additionalSecretOutputs: ["envs"] to its resource options`,
        });
      }
    }

    // The token at its source: the resource that generates it must keep its value secret in state. Resource
    // options are visible to CrossGuard, so this holds the control token to secrecy where values are not.
    for (const generator of stack.resources.filter(
      (r) => r.parentType === CONTROL_TOKEN_COMPONENT && r.type === TYPES.secret,
    )) {
      if (
        generator.additionalSecretOutputs !== undefined &&
        !generator.additionalSecretOutputs.includes(CONTROL_TOKEN_OUTPUT)
      ) {
        findings.push({
          resource: generator,
          message: `${describe(generator)} generates the control token but does not list "${CONTROL_TOKEN_OUTPUT}" in additionalSecretOutputs; add additionalSecretOutputs: ["${CONTROL_TOKEN_OUTPUT}"]`,
        });
      }
    }

    findings.push(...podFindings(stack));

    if (stack.secretsVisible && stack.outputs !== undefined) {
      const hasGateway =
        containers.some((c) => roleOf(c) === ROLES.gateway) ||
        ofType(stack, TYPES.pod).some((p) => podRoleOf(p) === ROLES.gateway);
      const token = stack.outputs[OUTPUTS.controlToken];
      if (token === undefined && hasGateway) {
        findings.push({
          message: `the stack has a gateway but exports no ${OUTPUTS.controlToken}; export the gateway's control token as a secret output`,
        });
      } else if (token !== undefined && !isSecretValue(token)) {
        findings.push({ message: `the ${OUTPUTS.controlToken} output is plaintext; export it as a Pulumi secret` });
      }
      const agentTokens = stack.outputs[OUTPUTS.agentTokens];
      if (agentTokens !== undefined && !isSecretValue(agentTokens)) {
        findings.push({
          message: `the ${OUTPUTS.agentTokens} output is plaintext; export it as a Pulumi secret (each opens a computer's DevTools)`,
        });
      }
    }

    const secrets = knownSecretValues(stack);
    if (secrets.size > 0) {
      const known = [...secrets];
      const leaks = (value: unknown, where: string, resource?: PolicyResource) => {
        // The fast walk first; paths are worked out only for a value that leaks.
        let leaked = false;
        visitStrings(value, (text, secret) => {
          if (!leaked && !secret && known.some((s) => text.includes(s))) leaked = true;
        });
        if (!leaked) return;
        for (const leaf of stringLeaves(value)) {
          if (!leaf.secret && known.some((s) => leaf.text.includes(s))) {
            findings.push({
              resource,
              message: `${where} ${leaf.path} holds a secret value in plaintext; pass it as a Pulumi secret`,
            });
          }
        }
      };
      for (const resource of stack.resources) leaks(resource.inputs, `${describe(resource)} input`, resource);
      leaks(stack.outputs ?? {}, "the stack output");
    }
    return findings;
  },
};
