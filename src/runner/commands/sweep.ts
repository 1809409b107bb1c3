// `multienv sweep --older-than <age>`: lists (and with --yes removes) the EC2 resources multienv tagged that are
// past that age, whatever stack state knows of them: the guard against a forgotten task that keeps billing.
import type { Command } from "commander";
import { RunnerError } from "../errors";
import { runAction, say } from "./common";

interface SweepCommandOptions {
  olderThan: string;
  region?: string;
  yes?: boolean;
  endpoint?: string;
}

export function register(program: Command): void {
  program
    .command("sweep")
    .description(
      "list the EC2 instances, security groups and key pairs tagged multienv:stack that are older than --older-than; with --yes, terminate the instances and delete the groups and key pairs " +
        "(AWS credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; a stack swept this way needs `pulumi refresh` or `pulumi stack rm --force`)",
    )
    .requiredOption("--older-than <age>", "the age past which a resource is swept, e.g. 4h, 2d, 1d12h")
    .option("--region <region>", "the AWS region (default: AWS_REGION or AWS_DEFAULT_REGION)")
    .option("--yes", "terminate and delete; without it, only list")
    .option("--endpoint <url>", "the EC2 API endpoint (default https://ec2.<region>.amazonaws.com/)")
    .action((options: SweepCommandOptions) =>
      runAction("sweep", async () => {
        const { parseAge, sweep } = require("../targets/ec2/sweep") as typeof import("../targets/ec2/sweep");
        const { credentialsFromEnv, queryEc2Api } =
          require("../targets/ec2/ec2-api") as typeof import("../targets/ec2/ec2-api");
        const olderThanMs = parseAge(options.olderThan);
        const region = options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION;
        if (!region) throw new RunnerError("no region: pass --region (e.g. --region us-east-1) or set AWS_REGION");
        const api = queryEc2Api({ region, credentials: credentialsFromEnv(), endpoint: options.endpoint });
        const report = await sweep({ api, olderThanMs, yes: options.yes === true, log: say });
        const total = report.instances.length + report.groups.length + report.keyPairs.length;
        if (!report.swept)
          say(
            total === 0
              ? `nothing tagged multienv:stack in ${region} is older than ${options.olderThan}`
              : `${total} resource(s) past ${options.olderThan}; run again with --yes to remove them`,
          );
      }),
    );
}
