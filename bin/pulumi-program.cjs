// Pulumi.yaml's nodeargs require this before Pulumi's Node.js host runs the program: the big plain-JS packages
// load first, then tsx's CommonJS hook, so the program's TypeScript runs from source without tsx inspecting every
// file of @pulumi/pulumi on the way (node's --import=tsx costs most of a second of each run that way).
require("@pulumi/pulumi");
require("tsx/cjs");
