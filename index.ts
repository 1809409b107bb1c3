// Pulumi.yaml `main`. The program is a function so `pulumi up` awaits it and its result is the stack's outputs.
import { multienvProgram } from "./src/program";

export = multienvProgram;
