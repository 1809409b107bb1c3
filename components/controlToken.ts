// The gateway's control token: random per deploy, stable across updates, a secret everywhere it appears.
//
// Why a command resource: the only providers available are pulumi, docker, aws and command; a command's
// `create` runs once when the resource is created and never on update (it has no triggers), so the token is
// generated once per deploy and kept in state. `logging: none` keeps it out of the engine's log, and
// `additionalSecretOutputs: ["stdout"]` makes the engine encrypt it in state. A dynamic provider would do the
// same but has to serialize its code into the state and costs a closure serialization on every run, `check`
// included. The program marks the exposed value secret itself too, so it is secret under mocks as well.
import * as command from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";

/** 32 random bytes, hex: node is present wherever the Pulumi program runs. */
export const CONTROL_TOKEN_COMMAND = `node -e "process.stdout.write(require('crypto').randomBytes(32).toString('hex'))"`;

export class ControlToken extends pulumi.ComponentResource {
  /** The token, a secret. */
  readonly value: pulumi.Output<string>;

  constructor(name: string, _args: Record<string, never>, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:index:ControlToken", name, {}, opts);
    const generator = new command.local.Command(
      `${name}-generator`,
      { create: CONTROL_TOKEN_COMMAND, logging: "none" },
      { parent: this, additionalSecretOutputs: ["stdout", "stderr"] },
    );
    this.value = pulumi.secret(generator.stdout);
    this.registerOutputs({ value: this.value });
  }
}
