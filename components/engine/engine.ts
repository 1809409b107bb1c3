// One Docker engine's shared pieces: @pulumi/docker's provider for it, its networks, its volumes and the images its
// containers run. Every child resource and every container on the engine is created with that provider, so the same
// component serves the local engine and a VM's (reached over SSH as the provider's `host` and `sshOpts`).
// The project's images are not built here: `npm run images` builds them, and the program hands each one's id as the
// runner's engine has it under its tag (src/program.ts reads it). Containers run that id, so an image rebuilt with
// other content replaces exactly the containers that run it, and a deploy declares no image resource for them.
// A recording image (a task's own HAR on the replay server's image) is built here, once per recording.
// A remote engine gets its images from the runner's engine (`imagesFrom`): referenced, built or pulled there, then
// copied with one `docker save | zstd | ssh docker load` of them all. A VM then needs no registry and no web access
// to get them: a computer VM whose security group has no web egress still gets its browser and proxy images.
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import { LocalCommand } from "../../src/providers/resources";
import type { EngineNetworks } from "../../src/plan/wiring";
import type { ProjectImageIds, ProjectImageRole, RemoteEngineImages } from "../../src/plan/images";
import { recordingImage } from "../../src/plan/replay";
import { shipImagesCommand, type EngineConnection, type SshEndpoint } from "../../src/plan/targets/ssh";

/** Where a remote engine gets its images: another engine (the runner's), and how to reach this one over SSH. */
export interface ImageSource {
  /** The engine the images are built or pulled on. */
  engine: DockerEngine;
  /** How this engine's host is reached over SSH. */
  ssh: pulumi.Input<SshEndpoint>;
  /** What must be done before images can be loaded here (the host's readiness check). */
  after: pulumi.Resource[];
  /** Every image this engine's containers run (src/plan/images.ts `remoteEngineImages`): shipped together. */
  images: RemoteEngineImages;
}

export interface DockerEngineArgs {
  /**
   * The engine: unset for the local one (DOCKER_HOST, else the default socket), or a `unix://` host; a remote
   * engine's `ssh://` host and options (src/plan/targets/ssh.ts `engineConnection`).
   */
  connection?: pulumi.Input<Partial<EngineConnection>>;
  /** Which networks this engine holds, internal (no route out) and external, by Docker name. */
  networks: EngineNetworks;
  /** Docker names of the volumes this engine holds. */
  volumes: string[];
  /**
   * The project's own images that containers on this engine run, by role: each one's id (`sha256:...`) on this
   * engine, as `npm run images` built it.
   */
  projectImages: ProjectImageIds;
  /**
   * The build context of the image carrying a recording (its HAR and Dockerfile, src/program.ts writes them), by the
   * recording's SHA-256, relative to the project directory: set where recording images are built.
   */
  recordingContext?: (sha256: string) => string;
  /** Labels put on every network, volume and container, so `docker ps --filter label=...` finds a stack's pieces. */
  labels: Record<string, string>;
  /** Copy images from another engine instead of referencing and pulling them here (`projectImages` is then unused). */
  imagesFrom?: ImageSource;
  /**
   * The machine the engine lives on, when the deploy creates it (a VM): every resource on the engine is deleted
   * with it, so a destroy never has to reach the engine (its SSH may be long gone) and only terminates the VM.
   */
  deletedWith?: pulumi.Resource;
}

/** One engine's networks, volumes and images, shared by every container created on it. */
export class DockerEngine extends pulumi.ComponentResource {
  private readonly networks = new Map<string, docker.Network>();
  private readonly volumes = new Map<string, docker.Volume>();
  private readonly projectImages: ProjectImageIds;
  private readonly pulledImages = new Map<string, docker.RemoteImage>();
  private readonly recordingImages = new Map<string, docker.RemoteImage>();
  private readonly recordingContext: ((sha256: string) => string) | undefined;
  /** Remote engines: the id of each image this engine has, by role or reference, once the one load is done. */
  private readonly shippedImages = new Map<string, pulumi.Output<string>>();
  /** True when the images come from another engine (`imagesFrom`). */
  private readonly remote: boolean;
  /** The component's name: it prefixes the names of images pulled on demand. */
  readonly engineName: string;
  /** The docker provider of this engine: every resource on it is created with it. */
  readonly provider: docker.Provider;
  /** Labels of the stack, for the containers created on this engine. */
  readonly labels: Record<string, string>;
  /** Options of every resource on this engine (its provider, `deletedWith`): spread them into a container's. */
  readonly onEngine: { provider: docker.Provider; deletedWith?: pulumi.Resource };
  /** `deletedWith` alone, for the local steps that act on the engine's machine (they are no docker resources). */
  private readonly onMachine: { deletedWith?: pulumi.Resource };

  constructor(name: string, args: DockerEngineArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:docker:DockerEngine", name, {}, opts);
    this.engineName = name;
    this.remote = args.imagesFrom !== undefined;
    this.recordingContext = args.recordingContext;
    this.projectImages = args.imagesFrom ? {} : args.projectImages;
    this.labels = args.labels;
    const connection = pulumi.output(args.connection ?? {});
    this.provider = new docker.Provider(
      `${name}-provider`,
      { host: connection.apply((c) => c.host), sshOpts: connection.apply((c) => c.sshOpts) },
      { parent: this },
    );
    this.onMachine = args.deletedWith === undefined ? {} : { deletedWith: args.deletedWith };
    this.onEngine = { provider: this.provider, ...this.onMachine };
    const labels = Object.entries(args.labels).map(([label, value]) => ({ label, value }));
    const all = [
      ...args.networks.internal.map((n) => [n, true] as const),
      ...args.networks.external.map((n) => [n, false] as const),
    ];
    const seen = new Set<string>();
    for (const [network, internal] of all) {
      if (seen.has(network))
        throw new pulumi.ResourceError(`DockerEngine ${name}: network ${network} is listed twice`, this);
      seen.add(network);
      this.networks.set(
        network,
        // Named after the engine, so two engines may hold networks of one Docker name.
        new docker.Network(
          `${name}-${network}`,
          { name: network, internal, driver: "bridge", labels },
          { parent: this, ...this.onEngine },
        ),
      );
    }
    for (const volume of args.volumes) {
      this.volumes.set(
        volume,
        new docker.Volume(`${name}-${volume}`, { name: volume, labels }, { parent: this, ...this.onEngine }),
      );
    }
    if (args.imagesFrom) this.shipAll(name, args.imagesFrom);
    // A remote engine's host, in the state: a destroy asks it over SSH first
    // (src/runner/targets/hosts/hosts-reachable.ts).
    this.registerOutputs(args.imagesFrom ? { ssh: args.imagesFrom.ssh } : {});
  }

  /**
   * Loads every image of `from.images` into this engine with one command (see `shipImagesCommand`), run again
   * when any image id or the host changes. Each shipped id carries the load as a dependency, so a container
   * using it starts only once its image is here.
   */
  private shipAll(name: string, from: ImageSource): void {
    const sources = new Map<string, pulumi.Output<string>>([
      ...from.images.roles.map((role) => [`project-${role}`, from.engine.image(undefined, role)] as const),
      ...from.images.refs.map((ref) => [ref, from.engine.pulledImage(ref)] as const),
      ...from.images.recordings.map((sha) => [`recording-${sha}`, from.engine.recordingImage(sha)] as const),
    ]);
    const ids = pulumi.all([...sources.values()]);
    const load = new LocalCommand(
      `${name}-load-images`,
      {
        create: pulumi.all([ids, from.ssh]).apply(([all, ssh]) => shipImagesCommand(all, ssh)),
        triggers: [ids, from.ssh],
      },
      { parent: this, dependsOn: from.after, ...this.onMachine },
    );
    for (const [key, id] of sources)
      this.shippedImages.set(
        key,
        pulumi.all([load.stdout, id]).apply(([, image]) => image),
      );
  }

  /** An image shipped here; asking for one the layout did not list for this engine is a bug in the layout. */
  private shipped(key: string): pulumi.Output<string> {
    const id = this.shippedImages.get(key);
    if (id === undefined)
      throw new pulumi.ResourceError(
        `DockerEngine ${this.engineName}: image ${key} is not among the images shipped here (has ${[...this.shippedImages.keys()].join(", ")})`,
        this,
      );
    return id;
  }

  /** The subnets of every network on this engine: addresses a computer's site proxy must never dial. */
  networkSubnets(): pulumi.Output<string[]> {
    return pulumi
      .all([...this.networks.values()].map((n) => n.ipamConfigs))
      .apply((all) => all.flat().flatMap((c) => (c.subnet ? [c.subnet] : [])));
  }

  /** The network resource named `name`; asking for one the engine does not hold is a bug in the layout. */
  network(name: string): docker.Network {
    const network = this.networks.get(name);
    if (network === undefined)
      throw new pulumi.ResourceError(
        `DockerEngine ${this.engineName}: no network ${name} on this engine (has ${[...this.networks.keys()].join(", ")})`,
        this,
      );
    return network;
  }

  volume(name: string): docker.Volume {
    const volume = this.volumes.get(name);
    if (volume === undefined)
      throw new pulumi.ResourceError(
        `DockerEngine ${this.engineName}: no volume ${name} on this engine (has ${[...this.volumes.keys()].join(", ")})`,
        this,
      );
    return volume;
  }

  /**
   * The image a container runs, as an image id: `image` when the config gives one, else the project's own
   * image for `role`, as this engine has it.
   */
  image(image: string | undefined, role: ProjectImageRole): pulumi.Output<string> {
    if (image !== undefined) return this.pulledImage(image);
    if (this.remote) return this.shipped(`project-${role}`);
    return pulumi.output(this.projectImage(role));
  }

  /** The id of the project's image for `role` here; asking for one the layout did not give is a bug in the layout. */
  private projectImage(role: ProjectImageRole): string {
    const id = this.projectImages[role];
    if (id === undefined)
      throw new pulumi.ResourceError(
        `DockerEngine ${this.engineName}: the ${role} image is not among the images of this engine (has ${Object.keys(this.projectImages).join(", ")})`,
        this,
      );
    return id;
  }

  /**
   * The image carrying the recording of SHA-256 `sha256` (src/plan/replay.ts `recordingImage`), built on this engine
   * FROM the replay server's image, or shipped here from the runner's. One resource per recording: a recording is
   * the task's input, so its image is built by the deploy that first replays it (a no-change one builds nothing).
   */
  recordingImage(sha256: string): pulumi.Output<string> {
    if (this.remote) return this.shipped(`recording-${sha256}`);
    let built = this.recordingImages.get(sha256);
    if (built === undefined) {
      const server = this.projectImages["replay-server"];
      if (server === undefined || this.recordingContext === undefined)
        throw new pulumi.ResourceError(
          `DockerEngine ${this.engineName}: recording images are not built on this engine (no replay server image or build context)`,
          this,
        );
      built = new docker.RemoteImage(
        `${this.engineName}-recording-${sha256.slice(0, 16)}`,
        {
          name: recordingImage(sha256),
          build: { context: this.recordingContext(sha256), dockerfile: "Dockerfile" },
          // The tag names the recording; a new replay server image under it rebuilds it.
          triggers: { server },
          // Tagged by content: other stacks may replay the same recording.
          keepLocally: true,
        },
        { parent: this, ...this.onEngine },
      );
      this.recordingImages.set(sha256, built);
    }
    return built.imageId;
  }

  /** An image given by reference: used as the engine has it, pulled when it has not. One resource per reference. */
  pulledImage(image: string): pulumi.Output<string> {
    if (this.remote) return this.shipped(image);
    let pulled = this.pulledImages.get(image);
    if (pulled === undefined) {
      const resourceName = `${this.engineName}-image-${image.replace(/[^A-Za-z0-9_.-]+/g, "-")}`;
      // Kept on destroy: the task's site images are the user's, and other stacks may run them.
      pulled = new docker.RemoteImage(
        resourceName,
        { name: image, keepLocally: true },
        { parent: this, ...this.onEngine },
      );
      this.pulledImages.set(image, pulled);
    }
    return pulled.imageId;
  }
}
