// A website of the env: its server (`<site>-server`) and, for a synthetic site, its frontend, each with a
// capture sidecar when capture is on. Settings reach the server as one JSON line in AGENTENV_WEBSITE_SETTINGS;
// when the site has secret settings their values are merged in and the whole value is a Pulumi secret.
import * as pulumi from "@pulumi/pulumi";
import type { Plan, PlannedContainer, PlannedWebsite } from "../../src/plan";
import { configPath, formatProblem, siteServerUrl } from "../../src/plan";
import { DEFAULT_CAPABILITIES, frontendNetworks, serverNetworks, websiteSettingsJson } from "../../src/plan/wiring";
import { ENV_VARS } from "../../src/protocol/env";
import { LABELS, ROLES } from "../../src/protocol/labels";
import { CaptureSidecar } from "./captureSidecar";
import { secretReferenceProblems, siteSecretReferences } from "../../src/config/secrets";
import * as docker from "@pulumi/docker";
import { containerLabels, containerOptions, envEntry, networksAdvanced, RESTART } from "./containers";
import type { DockerEngine } from "./engine";
import { ReplayServer } from "./replayServer";

export interface WebsiteArgs {
  /** The plan the site belongs to: its networks, and capture for the sidecars. */
  plan: Pick<Plan, "networks" | "capture">;
  /** The planned site. */
  site: PlannedWebsite;
  /** The engine the site's containers run on (networks, images). */
  engine: DockerEngine;
  /**
   * The stack's secret config values by key (namespace `multienv`): each key the site's `secretSettings` name
   * must be here; the others are not read.
   */
  secrets: Record<string, pulumi.Output<string>>;
  /** A pooled live site: the leased account's settings (a secret), put over the site's own. */
  account?: pulumi.Output<Record<string, unknown>>;
  /** The env's control token (a secret): a replayed site's replay server's token is derived from it (required then). */
  controlToken?: pulumi.Input<string>;
}

/** A website of the env: its server, its frontend (synthetic sites), and their capture sidecars. */
export class Website extends pulumi.ComponentResource {
  readonly server: docker.Container;
  /** Synthetic sites only. */
  readonly frontend?: docker.Container;
  /** Replayed live sites only: the replay server, the gateway's frontend for the site. */
  readonly replay?: ReplayServer;
  readonly sidecars: CaptureSidecar[] = [];

  constructor(name: string, args: WebsiteArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:website:Website", name, {}, opts);
    const { plan, site, engine } = args;
    const refs = siteSecretReferences(site.name, site.secretSettings);
    const unresolved = secretReferenceProblems(refs, (key) => (args.secrets[key] === undefined ? "unset" : "secret"));
    if (unresolved.length > 0)
      throw new pulumi.ResourceError(`Website ${name}: ${unresolved.map(formatProblem).join("; ")}`, this);
    const secretValues = Object.fromEntries(refs.map((ref) => [ref.setting, args.secrets[ref.key]]));
    if (site.live && site.frontend !== undefined) {
      throw new pulumi.ResourceError(`Website ${site.name}: a live site serves no pages, so it has no frontend`, this);
    }

    this.server = new docker.Container(
      `${name}-server`,
      {
        name: site.server.containerName,
        image: engine.pulledImage(requireImage(this, site, "server", site.server)),
        networksAdvanced: networksAdvanced(engine, serverNetworks(plan, site)),
        capabilities: DEFAULT_CAPABILITIES,
        envs: [
          settingsEnv(site, secretValues, args.account),
          envEntry(ENV_VARS.websiteDomains, JSON.stringify(site.domains)),
        ],
        restart: RESTART,
        labels: containerLabels(engine, siteLabels(site, "server")),
      },
      // Secret settings are in envs: the engine keeps envs secret even if a wrapper were lost (policy
      // secrets-stay-secret).
      {
        parent: this,
        ...containerOptions(engine),
        additionalSecretOutputs:
          Object.keys(site.secretSettings).length > 0 || args.account !== undefined ? ["envs"] : [],
      },
    );
    if (site.frontend !== undefined) {
      this.frontend = new docker.Container(
        `${name}-frontend`,
        {
          name: site.frontend.containerName,
          image: engine.pulledImage(requireImage(this, site, "frontend", site.frontend)),
          networksAdvanced: networksAdvanced(engine, frontendNetworks(plan, site)),
          capabilities: DEFAULT_CAPABILITIES,
          // The frontend's own server: two sites on one frontend image each reach theirs.
          envs: [envEntry(ENV_VARS.websiteServer, siteServerUrl(site))],
          restart: RESTART,
          labels: containerLabels(engine, siteLabels(site, "frontend")),
        },
        { parent: this, ...containerOptions(engine) },
      );
    }
    if (site.replay !== undefined && args.controlToken === undefined)
      throw new pulumi.ResourceError(`Website ${site.name}: a replayed site needs the control token`, this);
    if (site.replay !== undefined && args.controlToken !== undefined)
      this.replay = new ReplayServer(
        `${name}-replay`,
        { plan, site, engine, controlToken: args.controlToken },
        { parent: this },
      );
    for (const sidecar of plan.capture.sidecars.filter((s) => s.site === site.name)) {
      // A replayed site's replay server is captured as its frontend (src/plan/capture.ts).
      const target = sidecar.role === "server" ? this.server : (this.frontend ?? this.replay?.container);
      if (target === undefined)
        throw new pulumi.ResourceError(
          `Website ${site.name}: the plan captures a ${sidecar.role} the site does not have`,
          this,
        );
      this.sidecars.push(
        new CaptureSidecar(`${name}-${sidecar.role}-capture`, { plan, sidecar, target, engine }, { parent: this }),
      );
    }
    this.registerOutputs({
      server: this.server.name,
      frontend: this.frontend?.name,
      replay: this.replay?.container.name,
    });
  }

  /** Every container of the site, sidecars included: the gateway starts after them. */
  containers(): docker.Container[] {
    return [
      this.server,
      ...(this.frontend ? [this.frontend] : []),
      ...(this.replay ? [this.replay.container] : []),
      ...this.sidecars.map((s) => s.container),
    ];
  }
}

/**
 * Site images are the task's own: there is no project image to fall back to. The plan leaves `image` unset
 * when the config has none, so this is refused here, naming the config key that fixes it.
 */
function requireImage(
  website: Website,
  site: PlannedWebsite,
  role: "server" | "frontend",
  container: PlannedContainer,
): string {
  if (container.image === undefined) {
    const path = configPath(["websites", site.name, role, "image"]);
    throw new pulumi.ResourceError(
      formatProblem({ path, message: `a website's ${role} needs an image (the task's own site image); set ${path}` }),
      website,
    );
  }
  return container.image;
}

function settingsEnv(
  site: PlannedWebsite,
  secretValues: Record<string, pulumi.Output<string>>,
  account?: pulumi.Output<Record<string, unknown>>,
): pulumi.Output<string> {
  // A pool's account settings are secret wherever they go: the whole value is.
  if (account !== undefined)
    return pulumi.secret(
      envEntry(
        ENV_VARS.websiteSettings,
        account.apply((settings) => websiteSettingsJson({ ...site.settings, ...settings }, {})),
      ),
    );
  const names = Object.keys(site.secretSettings);
  if (names.length === 0) return envEntry(ENV_VARS.websiteSettings, websiteSettingsJson(site.settings, {}));
  const values = pulumi.all(Object.fromEntries(names.map((n) => [n, secretValues[n]])));
  return pulumi.secret(
    envEntry(
      ENV_VARS.websiteSettings,
      values.apply((v) => websiteSettingsJson(site.settings, v)),
    ),
  );
}

/** Marks the policy pack reads (policies/contract.ts): role, site, and which settings are secret (names only). */
function siteLabels(site: PlannedWebsite, role: "server" | "frontend"): Record<string, string> {
  const secretNames = Object.keys(site.secretSettings);
  return {
    [LABELS.role]: role === "server" ? ROLES.server : ROLES.frontend,
    [LABELS.site]: site.name,
    ...(role === "server" && secretNames.length > 0 ? { [LABELS.secretSettings]: secretNames.sort().join(",") } : {}),
    ...(role === "server" && site.accountPool !== undefined ? { [LABELS.accountPool]: site.accountPool } : {}),
  };
}
