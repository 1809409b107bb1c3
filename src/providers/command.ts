// Two small dynamic-provider resource kinds the deploy needs besides Docker:
// - `command`: a shell command run on the machine running Pulumi when the resource is created (and again when
//   its inputs change), and another when it is deleted, e.g. the capture collector's collection before a
//   destroy. Its environment may hold secrets; the resource keeps them secret in the state.
// - `secret`: random bytes, made once and kept for the life of the resource (the control token).
// Dynamic resources because no package this project can use serves them: @pulumi/command's provider cannot be
// built here (its modules are refused at every version with code), and the packages used have no random bytes.
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { diffInputs, pick, type Operations } from "./operation";

const COMMAND_INPUT_KEYS = ["create", "update", "delete", "environment", "dir", "triggers"] as const;
const SECRET_INPUT_KEYS = ["bytes"] as const;

/** Output of a command is capped in the state: a chatty command must not bloat it. */
const MAX_OUTPUT = 64 * 1024;

function run(what: string, command: string, inputs: Record<string, any>): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      "/bin/sh",
      ["-c", command],
      { cwd: inputs.dir, env: { ...process.env, ...(inputs.environment ?? {}) }, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) {
          const detail = (stderr || error.message).trim().split("\n").slice(-10).join("\n");
          return reject(new Error(`${what} step failed (exit ${(error as { code?: number }).code ?? "?"}): ${detail}`));
        }
        resolve({ stdout: stdout.replace(/\n$/, "").slice(-MAX_OUTPUT), stderr: stderr.slice(-MAX_OUTPUT) });
      },
    );
  });
}

export const command: Operations = {
  async diff(_id, olds, news) {
    // A new create command or trigger runs the command anew; a new environment, update or delete step applies
    // from now on (the capture collector's delete step always sees the gateway's current address).
    return diffInputs(olds, news, COMMAND_INPUT_KEYS, { replaceOn: ["create", "dir", "triggers"] });
  },
  async create(inputs) {
    const out = await run("create", inputs.create, inputs);
    return { id: `command-${randomBytes(8).toString("hex")}`, outs: { ...pick(inputs, COMMAND_INPUT_KEYS), ...out } };
  },
  async update(_id, olds, news) {
    const out = news.update ? await run("update", news.update, news) : { stdout: olds.stdout, stderr: olds.stderr };
    return { outs: { ...pick(news, COMMAND_INPUT_KEYS), ...out } };
  },
  async delete(_id, props) {
    if (props.delete) await run("delete", props.delete, props);
  },
};

export const secret: Operations = {
  async diff(_id, olds, news) {
    return diffInputs(olds, news, SECRET_INPUT_KEYS, { replaceOn: "all" });
  },
  async create(inputs) {
    const bytes = typeof inputs.bytes === "number" ? inputs.bytes : 32;
    return {
      id: `secret-${randomBytes(8).toString("hex")}`,
      outs: { bytes, value: randomBytes(bytes).toString("hex") },
    };
  },
};
