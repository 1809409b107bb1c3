// The few EC2 API calls `multienv sweep` makes, over EC2's Query protocol (form-encoded POST, XML answers)
// signed with Signature Version 4, on node's own fetch and crypto: the sweep needs no AWS SDK, and the program
// none at all (Pulumi's AWS provider does the deploy's calls). Credentials come from the environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), as every AWS tool reads them.
import { createHash, createHmac } from "node:crypto";
import { RunnerError } from "../../errors";

const VERSION = "2016-11-15";

export interface Ec2Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/** A tagged EC2 resource as the sweep sees it. */
export interface TaggedInstance {
  id: string;
  state: string;
  launchTime: Date;
  tags: Record<string, string>;
}

export interface TaggedGroup {
  id: string;
  name: string;
  tags: Record<string, string>;
}

export interface TaggedKeyPair {
  id: string;
  name: string;
  createTime: Date;
  tags: Record<string, string>;
}

export interface GroupRule {
  id: string;
  groupId: string;
  egress: boolean;
}

/** What the sweep needs from EC2: an interface, so tests can hand in a fake. */
export interface Ec2Api {
  /** Instances carrying the tag key, in any state but terminated. */
  instances(tagKey: string): Promise<TaggedInstance[]>;
  terminate(ids: string[]): Promise<void>;
  groups(tagKey: string): Promise<TaggedGroup[]>;
  /** The rules of the groups (so groups that name each other can be emptied before they are deleted). */
  groupRules(groupIds: string[]): Promise<GroupRule[]>;
  revokeRules(groupId: string, egress: boolean, ruleIds: string[]): Promise<void>;
  deleteGroup(id: string): Promise<void>;
  keyPairs(tagKey: string): Promise<TaggedKeyPair[]>;
  deleteKeyPair(id: string): Promise<void>;
}

/** The credentials in the environment, or a RunnerError saying which variable to set. */
export function credentialsFromEnv(env: NodeJS.ProcessEnv = process.env): Ec2Credentials {
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  if (!accessKeyId || !secretAccessKey) {
    throw new RunnerError(
      "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones) in the environment",
    );
  }
  return { accessKeyId, secretAccessKey, ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}) };
}

const sha256 = (data: string) => createHash("sha256").update(data).digest("hex");
const hmac = (key: Buffer | string, data: string) => createHmac("sha256", key).update(data).digest();

/** SigV4's signing key of a secret for a day (`20150830`), region and service. */
export function signingKey(secret: string, day: string, region: string, service: string): Buffer {
  let key = hmac(`AWS4${secret}`, day);
  for (const part of [region, service, "aws4_request"]) key = hmac(key, part);
  return key;
}

/** The headers of a SigV4-signed POST of `body` to `url` for `service` in `region`. */
export function signedHeaders(
  url: URL,
  body: string,
  region: string,
  credentials: Ec2Credentials,
  now = new Date(),
  service = "ec2",
): Record<string, string> {
  const amzDate = now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
  const day = amzDate.slice(0, 8);
  const headers: Record<string, string> = {
    "content-type": "application/x-www-form-urlencoded; charset=utf-8",
    host: url.host,
    "x-amz-date": amzDate,
    ...(credentials.sessionToken ? { "x-amz-security-token": credentials.sessionToken } : {}),
  };
  const names = Object.keys(headers).sort();
  const canonical = [
    "POST",
    url.pathname || "/",
    "",
    ...names.map((n) => `${n}:${headers[n]}`),
    "",
    names.join(";"),
    sha256(body),
  ].join("\n");
  const scope = `${day}/${region}/${service}/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256(canonical)].join("\n");
  const signature = createHmac("sha256", signingKey(credentials.secretAccessKey, day, region, service))
    .update(toSign)
    .digest("hex");
  return {
    ...headers,
    authorization: `AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${names.join(";")}, Signature=${signature}`,
  };
}

/** An XML element: its name, text and children (EC2's answers carry nothing in attributes). */
export interface XmlNode {
  name: string;
  text: string;
  children: XmlNode[];
}

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };
const decode = (text: string) =>
  text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, e: string) =>
    e[0] === "#"
      ? String.fromCodePoint(e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : Number(e.slice(1)))
      : (ENTITIES[e] ?? whole),
  );

/** Parses the XML of an EC2 answer (elements, text, entities; declarations and comments skipped). */
export function parseXml(xml: string): XmlNode {
  const root: XmlNode = { name: "", text: "", children: [] };
  const stack = [root];
  const token = /<(\/?)([A-Za-z_][\w.:-]*)[^>]*?(\/?)>|<\?[\s\S]*?\?>|<!--[\s\S]*?-->|([^<]+)/g;
  for (const m of xml.matchAll(token)) {
    const top = stack[stack.length - 1];
    if (m[4] !== undefined) top.text += decode(m[4]);
    else if (m[2] === undefined) continue;
    else if (m[1] === "/") {
      if (top.name !== m[2]) throw new Error(`malformed XML: </${m[2]}> closes <${top.name}>`);
      stack.pop();
    } else {
      const node: XmlNode = { name: m[2], text: "", children: [] };
      top.children.push(node);
      if (m[3] !== "/") stack.push(node);
    }
  }
  return root;
}

const child = (node: XmlNode | undefined, name: string) => node?.children.find((c) => c.name === name);
const text = (node: XmlNode | undefined, name: string) => child(node, name)?.text.trim() ?? "";
const items = (node: XmlNode | undefined, name: string) =>
  child(node, name)?.children.filter((c) => c.name === "item") ?? [];
const tagsOf = (node: XmlNode) =>
  Object.fromEntries(items(node, "tagSet").map((t) => [text(t, "key"), text(t, "value")]));

/** EC2's Query API at `endpoint` (default `https://ec2.<region>.amazonaws.com/`). */
export function queryEc2Api(options: { region: string; credentials: Ec2Credentials; endpoint?: string }): Ec2Api {
  const url = new URL(options.endpoint ?? `https://ec2.${options.region}.amazonaws.com/`);
  async function call(action: string, params: Record<string, string> = {}): Promise<XmlNode> {
    const body = new URLSearchParams({ Action: action, Version: VERSION, ...params }).toString();
    const response = await fetch(url, {
      method: "POST",
      headers: signedHeaders(url, body, options.region, options.credentials),
      body,
    });
    const answer = parseXml(await response.text());
    if (!response.ok) {
      const error = answer.children[0]?.children.find((c) => c.name === "Errors")?.children[0];
      throw new RunnerError(
        `EC2 ${action} failed (${response.status}): ${text(error, "Code") || "error"}: ${text(error, "Message")}`,
      );
    }
    return answer.children[0];
  }
  /** Every page of a Describe call. */
  async function pages(action: string, params: Record<string, string>, each: (page: XmlNode) => void): Promise<void> {
    let token: string | undefined;
    do {
      const page = await call(action, { ...params, ...(token ? { NextToken: token } : {}) });
      each(page);
      token = text(page, "nextToken") || undefined;
    } while (token);
  }
  const byTagKey = (tagKey: string) => ({ "Filter.1.Name": "tag-key", "Filter.1.Value.1": tagKey });
  const listed = (prefix: string, values: string[]) =>
    Object.fromEntries(values.map((v, i) => [`${prefix}.${i + 1}`, v]));
  return {
    async instances(tagKey) {
      const found: TaggedInstance[] = [];
      await pages("DescribeInstances", byTagKey(tagKey), (page) => {
        for (const reservation of items(page, "reservationSet")) {
          for (const i of items(reservation, "instancesSet")) {
            const state = text(child(i, "instanceState"), "name");
            if (state !== "terminated")
              found.push({
                id: text(i, "instanceId"),
                state,
                launchTime: new Date(text(i, "launchTime")),
                tags: tagsOf(i),
              });
          }
        }
      });
      return found;
    },
    async terminate(ids) {
      if (ids.length > 0) await call("TerminateInstances", listed("InstanceId", ids));
    },
    async groups(tagKey) {
      const found: TaggedGroup[] = [];
      await pages("DescribeSecurityGroups", byTagKey(tagKey), (page) => {
        for (const g of items(page, "securityGroupInfo"))
          found.push({ id: text(g, "groupId"), name: text(g, "groupName"), tags: tagsOf(g) });
      });
      return found;
    },
    async groupRules(groupIds) {
      const found: GroupRule[] = [];
      if (groupIds.length === 0) return found;
      await pages(
        "DescribeSecurityGroupRules",
        { "Filter.1.Name": "group-id", ...listed("Filter.1.Value", groupIds) },
        (page) => {
          for (const r of items(page, "securityGroupRuleSet"))
            found.push({
              id: text(r, "securityGroupRuleId"),
              groupId: text(r, "groupId"),
              egress: text(r, "isEgress") === "true",
            });
        },
      );
      return found;
    },
    async revokeRules(groupId, egress, ruleIds) {
      if (ruleIds.length > 0)
        await call(egress ? "RevokeSecurityGroupEgress" : "RevokeSecurityGroupIngress", {
          GroupId: groupId,
          ...listed("SecurityGroupRuleId", ruleIds),
        });
    },
    async deleteGroup(id) {
      await call("DeleteSecurityGroup", { GroupId: id });
    },
    async keyPairs(tagKey) {
      const answer = await call("DescribeKeyPairs", byTagKey(tagKey));
      return items(answer, "keySet").map((k) => ({
        id: text(k, "keyPairId"),
        name: text(k, "keyName"),
        createTime: new Date(text(k, "createTime")),
        tags: tagsOf(k),
      }));
    },
    async deleteKeyPair(id) {
      await call("DeleteKeyPair", { KeyPairId: id });
    },
  };
}
