// `sshHostKey`: an SSH host key pair made at deploy with ssh-keygen, kept for the life of the resource. The VM
// gets the private key in its user data (its sshd presents it, and only it), and the runner pins the public
// key, so no connection ever accepts a key it was not given. The private key is a secret output.
// A dynamic resource because no package this project uses makes an SSH host key pair (@pulumi/tls is not among them).
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { diffInputs, type Operations } from "./operation";

const INPUT_KEYS = ["comment"] as const;

function keygen(comment: string): Promise<{ publicKey: string; privateKey: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-hostkey-"));
  const file = path.join(dir, "key");
  return new Promise((resolve, reject) => {
    execFile("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", file], (error, _out, stderr) => {
      try {
        if (error)
          return reject(
            new Error(`ssh-keygen failed (${(stderr || error.message).trim()}); is openssh-client installed?`),
          );
        resolve({
          publicKey: fs.readFileSync(`${file}.pub`, "utf8").trim(),
          privateKey: fs.readFileSync(file, "utf8"),
        });
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}

export const sshHostKey: Operations = {
  async diff(_id, olds, news) {
    return diffInputs(olds, news, INPUT_KEYS, { replaceOn: "all" });
  },
  async create(inputs) {
    const comment = typeof inputs.comment === "string" ? inputs.comment : "multienv";
    const key = await keygen(comment);
    return { id: `hostkey-${key.publicKey.split(" ")[1].slice(-16)}`, outs: { comment, ...key } };
  },
};
