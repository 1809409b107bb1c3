// The CrossGuard entry point: `pulumi up --policy-pack policies` runs this file. It only constructs the
// pack; the policies are built in pack.ts from the rules in rules/, which `multienv check` runs too.
import { PolicyPack } from "@pulumi/policy";
import { PACK_NAME, policies } from "./pack";

new PolicyPack(PACK_NAME, { policies, enforcementLevel: "mandatory" });
