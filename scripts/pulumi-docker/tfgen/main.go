// pulumi-tfgen-docker writes the package schema the provider embeds (`schema --out DIR`).
package main

import (
	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfgen"
	pulumidocker "multienv.local/pulumi-docker"
)

var version = "0.0.0"

func main() { tfgen.Main("docker", version, pulumidocker.Info(version)) }
