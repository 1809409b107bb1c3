// Images as dynamic-provider resource kinds.
// - `image` builds a Dockerfile on an engine from a context of named files (the Engine API's classic builder,
//   which needs no BuildKit session). Its check step hashes those files, so an unchanged context is no change
//   and a changed one rebuilds; the output is the image id, so containers run what was built.
// - `imageRef` is an image given by reference (the task's site images): used as the engine has it, pulled when
//   it has not. Its check step reads the id the engine has now, so a retagged image replaces the containers
//   that run it on the next deploy.
// Neither removes its image on delete: a tag may be shared by every stack on the engine.
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { PassThrough, Readable } from "node:stream";
import * as tar from "tar";
import { dockerApi, isNotFound, type DockerApi, type EngineTarget } from "./docker-api";
import { diffInputs, hasUnknown, pick, type Operations } from "./operation";

const IMAGE_INPUT_KEYS = [
  "engine",
  "imageName",
  "context",
  "dockerfile",
  "files",
  "buildArgs",
  "labels",
  "contextDigest",
] as const;
const IMAGE_REF_INPUT_KEYS = ["engine", "name", "engineImageId"] as const;

/** sha256 of the Dockerfile, the context's files (names and contents) and the build's arguments and labels. */
export function contextDigest(inputs: Record<string, any>): string {
  const hash = createHash("sha256");
  const context = inputs.context as string;
  for (const file of [inputs.dockerfile as string, ...((inputs.files as string[]) ?? [])]) {
    hash.update(`${file}\0`);
    hash.update(fs.readFileSync(path.join(context, file)));
    hash.update("\0");
  }
  hash.update(JSON.stringify([inputs.buildArgs ?? {}, inputs.labels ?? {}]));
  return hash.digest("hex");
}

/** The build context as a tar stream: the Dockerfile and the named files, with no host-specific metadata. */
function contextTar(inputs: Record<string, any>): Readable {
  const files = [inputs.dockerfile as string, ...((inputs.files as string[]) ?? [])];
  return tar.c(
    { cwd: inputs.context as string, portable: true, mtime: new Date(0), noDirRecurse: true },
    files,
  ) as unknown as Readable;
}

interface BuildMessage {
  stream?: string;
  error?: string;
  errorDetail?: { message?: string };
  aux?: { ID?: string };
}

async function build(api: DockerApi, inputs: Record<string, any>): Promise<string> {
  const query = new URLSearchParams({
    t: inputs.imageName,
    dockerfile: inputs.dockerfile,
    buildargs: JSON.stringify(inputs.buildArgs ?? {}),
    labels: JSON.stringify(inputs.labels ?? {}),
    rm: "1",
    forcerm: "1",
  });
  const body = new PassThrough();
  contextTar(inputs)
    .on("error", (e) => body.destroy(e))
    .pipe(body);
  const res = await api.stream("POST", `/build?${query}`, body, { "content-type": "application/x-tar" });
  let id: string | undefined;
  const tail: string[] = [];
  let buffered = "";
  for await (const chunk of res) {
    buffered += (chunk as Buffer).toString("utf8");
    const lines = buffered.split("\n");
    buffered = lines.pop() ?? "";
    for (const line of lines) {
      if (!line.trim()) continue;
      const message = JSON.parse(line) as BuildMessage;
      if (message.stream) tail.push(...message.stream.split("\n").filter((l) => l.trim()));
      if (message.error || message.errorDetail) {
        throw new Error(
          `image ${inputs.imageName}: the build failed: ${message.errorDetail?.message ?? message.error}\n${tail.slice(-15).join("\n")}`,
        );
      }
      if (message.aux?.ID) id = message.aux.ID;
    }
  }
  if (id === undefined) {
    const info = await api.request("GET", `/images/${encodeURIComponent(inputs.imageName)}/json`);
    id = info.Id as string;
  }
  return id;
}

export const image: Operations = {
  async check(_olds, news) {
    if (hasUnknown([news.context, news.dockerfile, news.files, news.buildArgs, news.labels])) return { inputs: news };
    const missing = [news.dockerfile, ...(news.files ?? [])].filter(
      (f: string) => !fs.existsSync(path.join(news.context, f)),
    );
    if (missing.length > 0) {
      return {
        inputs: news,
        failures: [
          { property: "files", reason: `image ${news.imageName}: ${missing.join(", ")} missing in ${news.context}` },
        ],
      };
    }
    return { inputs: { ...news, contextDigest: contextDigest(news) } };
  },
  async diff(_id, olds, news) {
    return diffInputs(olds, news, IMAGE_INPUT_KEYS, { replaceOn: ["engine"] });
  },
  async create(inputs) {
    const api = dockerApi(inputs.engine as EngineTarget);
    try {
      const imageId = await build(api, inputs);
      return { id: `${inputs.imageName}@${imageId}`, outs: { ...pick(inputs, IMAGE_INPUT_KEYS), imageId } };
    } finally {
      api.close();
    }
  },
  async update(_id, _olds, news) {
    const api = dockerApi(news.engine as EngineTarget);
    try {
      return { outs: { ...pick(news, IMAGE_INPUT_KEYS), imageId: await build(api, news) } };
    } finally {
      api.close();
    }
  },
  async read(id, props) {
    const api = dockerApi(props.engine as EngineTarget);
    try {
      await api.request("GET", `/images/${encodeURIComponent(props.imageId)}/json`);
      return { id, props };
    } catch (error) {
      if (isNotFound(error)) return {};
      throw error;
    } finally {
      api.close();
    }
  },
};

/** The id the engine has for `name`, or undefined. */
async function engineImageId(api: DockerApi, name: string): Promise<string | undefined> {
  try {
    return (await api.request("GET", `/images/${encodeURIComponent(name)}/json`)).Id as string;
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

async function pull(api: DockerApi, name: string): Promise<void> {
  const res = await api.stream("POST", `/images/create?fromImage=${encodeURIComponent(name)}`, Readable.from([]));
  let text = "";
  for await (const chunk of res) text += (chunk as Buffer).toString("utf8");
  const error = text
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as BuildMessage)
    .find((m) => m.error);
  if (error) throw new Error(error.error);
}

async function resolveRef(inputs: Record<string, any>): Promise<string> {
  const api = dockerApi(inputs.engine as EngineTarget);
  try {
    let id = await engineImageId(api, inputs.name);
    if (id === undefined) {
      await pull(api, inputs.name).catch((e: Error) => {
        throw new Error(
          `image ${inputs.name} is not on the engine at ${api.where} and could not be pulled (${e.message}); build it there (for the sample sites: npm run images) or push it to a registry that engine reaches`,
        );
      });
      id = await engineImageId(api, inputs.name);
    }
    if (id === undefined)
      throw new Error(`image ${inputs.name}: pulled, yet the engine at ${api.where} does not have it`);
    return id;
  } finally {
    api.close();
  }
}

export const imageRef: Operations = {
  async check(_olds, news) {
    // The engine may not exist yet (a VM this deploy creates): then there is nothing to read.
    if (hasUnknown(news.engine) || hasUnknown(news.name)) return { inputs: news };
    const api = dockerApi(news.engine as EngineTarget);
    try {
      const id = await engineImageId(api, news.name).catch(() => undefined);
      return { inputs: id === undefined ? news : { ...news, engineImageId: id } };
    } finally {
      api.close();
    }
  },
  async diff(_id, olds, news) {
    // A check that could not read the engine says nothing about the image: keep what was there.
    const compared = news.engineImageId === undefined ? { ...news, engineImageId: olds.engineImageId } : news;
    return diffInputs(olds, compared, IMAGE_REF_INPUT_KEYS, { replaceOn: ["engine", "name"] });
  },
  async create(inputs) {
    const imageId = await resolveRef(inputs);
    return {
      id: `${inputs.name}@${imageId}`,
      outs: { ...pick(inputs, IMAGE_REF_INPUT_KEYS), engineImageId: imageId, imageId },
    };
  },
  async update(_id, _olds, news) {
    const imageId = await resolveRef(news);
    return { outs: { ...pick(news, IMAGE_REF_INPUT_KEYS), engineImageId: imageId, imageId } };
  },
  async read(id, props) {
    const api = dockerApi(props.engine as EngineTarget);
    try {
      return (await engineImageId(api, props.imageId)) === undefined ? {} : { id, props };
    } finally {
      api.close();
    }
  },
};
