// Type tests: checked by \`tsc --noEmit\` (the first step of \`npm test\`), where a mismatch is a compile error.
// The schema's output is the StackConfig the plan takes, key for key, so neither can drift from the other.
import { expectTypeOf } from "vitest";
import type { z } from "zod";
import type { stackConfigSchema } from "../../src/config/schema";
import type { StackConfig } from "../../src/plan/types";

type Parsed = z.output<typeof stackConfigSchema>;
expectTypeOf<Parsed>().toExtend<StackConfig>();
expectTypeOf<keyof Parsed>().toEqualTypeOf<keyof StackConfig>();
expectTypeOf<keyof Parsed["websites"][string]>().toEqualTypeOf<keyof StackConfig["websites"][string]>();
expectTypeOf<keyof Parsed["computers"][string]>().toEqualTypeOf<keyof StackConfig["computers"][string]>();
expectTypeOf<keyof NonNullable<Parsed["ec2"]>>().toEqualTypeOf<keyof NonNullable<StackConfig["ec2"]>>();
