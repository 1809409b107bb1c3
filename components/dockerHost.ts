// docker target: the local Docker engine, reached through a docker provider every container child uses.
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";

export interface DockerHostArgs {
  /**
   * The engine's address (`unix:///var/run/docker.sock`, `tcp://...`, `ssh://...`). Unset: the provider's own
   * default, which honours DOCKER_HOST and else uses the local socket.
   */
  host?: pulumi.Input<string>;
}

export class DockerHost extends pulumi.ComponentResource {
  /** The provider every docker resource on this host is created with. */
  readonly provider: docker.Provider;

  constructor(name: string, args: DockerHostArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:docker:DockerHost", name, {}, opts);
    this.provider = new docker.Provider(`${name}-docker`, args.host === undefined ? {} : { host: args.host }, { parent: this });
    this.registerOutputs({});
  }
}
