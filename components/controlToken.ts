// The control token of a deploy: 32 random bytes, made once when the stack is first deployed and kept across
// updates (so the runner's token stays valid), a secret everywhere: state, outputs, the gateway's environment.
import * as pulumi from "@pulumi/pulumi";
import { RandomSecret } from "../src/providers/resources";

/** The control token of one multi env. Its args are empty by design: the token depends on nothing. */
export class ControlToken extends pulumi.ComponentResource {
  /** The token, a secret. */
  readonly value: pulumi.Output<string>;

  constructor(name: string, _args: Record<string, never>, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:index:ControlToken", name, {}, opts);
    const generator = new RandomSecret(`${name}-generator`, { bytes: 32 }, { parent: this });
    this.value = pulumi.secret(generator.value);
    this.registerOutputs({ value: this.value });
  }
}
