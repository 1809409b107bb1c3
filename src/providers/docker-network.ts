// Docker networks and volumes as dynamic-provider resource kinds (input names as @pulumi/docker's).
// A network's outputs include the subnets the engine gave it, so the deploy can tell a site proxy which
// addresses belong to the env and must never be dialled.
import { dockerApi, isNotFound, type EngineTarget } from "./docker-api";
import { diffInputs, pick, type Operations } from "./operation";

const NETWORK_INPUT_KEYS = ["engine", "name", "driver", "internal", "labels", "options", "ipamConfigs"] as const;
const VOLUME_INPUT_KEYS = ["engine", "name", "driver", "labels"] as const;

type Labels = { label: string; value: string }[] | undefined;
const labelsOf = (labels: Labels) => Object.fromEntries((labels ?? []).map((l) => [l.label, l.value]));

function subnetsOf(info: any): string[] {
  return ((info.IPAM?.Config ?? []) as { Subnet?: string }[])
    .map((c) => c.Subnet)
    .filter((s): s is string => typeof s === "string");
}

export const network: Operations = {
  async diff(_id, olds, news) {
    return diffInputs(olds, news, NETWORK_INPUT_KEYS, { replaceOn: "all", deleteFirst: true });
  },
  async create(inputs) {
    const api = dockerApi(inputs.engine as EngineTarget);
    try {
      const body = {
        Name: inputs.name,
        Driver: inputs.driver ?? "bridge",
        Internal: inputs.internal ?? false,
        Labels: labelsOf(inputs.labels),
        Options: inputs.options,
        CheckDuplicate: true,
        ...(inputs.ipamConfigs
          ? {
              IPAM: {
                Config: (inputs.ipamConfigs as { subnet?: string; gateway?: string }[]).map((c) => ({
                  Subnet: c.subnet,
                  Gateway: c.gateway,
                })),
              },
            }
          : {}),
      };
      const created = await api.request<{ Id: string }>("POST", "/networks/create", body).catch((e) => {
        if ((e as { status?: number }).status === 409) {
          throw new Error(
            `network ${inputs.name}: a network of that name already exists on ${api.where} (a leftover, or another stack's); remove it with \`docker network rm ${inputs.name}\``,
            { cause: e },
          );
        }
        if (/non-overlapping IPv4 address pool/.test((e as Error).message)) {
          throw new Error(
            `network ${inputs.name}: the engine on ${api.where} has no address range left for another network (Docker's default pools hold about 30 networks, and every env takes several); give dockerd wider pools, e.g. "default-address-pools": [{"base": "10.200.0.0/13", "size": 26}] in /etc/docker/daemon.json (README "Many stacks on one engine")`,
            { cause: e },
          );
        }
        throw e;
      });
      const info = await api.request("GET", `/networks/${created.Id}`);
      return { id: created.Id, outs: { ...pick(inputs, NETWORK_INPUT_KEYS), subnets: subnetsOf(info) } };
    } finally {
      api.close();
    }
  },
  async read(id, props) {
    const api = dockerApi(props.engine as EngineTarget);
    try {
      const info = await api.request("GET", `/networks/${encodeURIComponent(id)}`);
      return { id, props: { ...props, subnets: subnetsOf(info) } };
    } catch (error) {
      if (isNotFound(error)) return {};
      throw error;
    } finally {
      api.close();
    }
  },
  async delete(id, props) {
    const api = dockerApi(props.engine as EngineTarget);
    try {
      // Whatever is still attached (a container someone connected by hand) must not keep the network alive.
      const info = await api.request("GET", `/networks/${encodeURIComponent(id)}`).catch((e) => {
        if (isNotFound(e)) return undefined;
        throw e;
      });
      if (info === undefined) return;
      for (const endpoint of Object.keys(info.Containers ?? {})) {
        await api
          .request("POST", `/networks/${encodeURIComponent(id)}/disconnect`, { Container: endpoint, Force: true })
          .catch(() => undefined);
      }
      await api.request("DELETE", `/networks/${encodeURIComponent(id)}`).catch((e) => {
        if (!isNotFound(e)) throw e;
      });
    } finally {
      api.close();
    }
  },
};

export const volume: Operations = {
  async diff(_id, olds, news) {
    return diffInputs(olds, news, VOLUME_INPUT_KEYS, { replaceOn: "all", deleteFirst: true });
  },
  async create(inputs) {
    const api = dockerApi(inputs.engine as EngineTarget);
    try {
      const created = await api.request<{ Name: string }>("POST", "/volumes/create", {
        Name: inputs.name,
        Driver: inputs.driver ?? "local",
        Labels: labelsOf(inputs.labels),
      });
      return { id: created.Name, outs: pick(inputs, VOLUME_INPUT_KEYS) };
    } finally {
      api.close();
    }
  },
  async read(id, props) {
    const api = dockerApi(props.engine as EngineTarget);
    try {
      await api.request("GET", `/volumes/${encodeURIComponent(id)}`);
      return { id, props };
    } catch (error) {
      if (isNotFound(error)) return {};
      throw error;
    } finally {
      api.close();
    }
  },
  async delete(id, props) {
    const api = dockerApi(props.engine as EngineTarget);
    try {
      await api.request("DELETE", `/volumes/${encodeURIComponent(id)}?force=1`).catch((e) => {
        if (!isNotFound(e)) throw e;
      });
    } finally {
      api.close();
    }
  },
};
