// pulumi-resource-docker: the bridged provider, serving the schema tfgen wrote.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfbridge"
	pulumidocker "multienv.local/pulumi-docker"
)

//go:embed schema.json
var schema []byte

var version = "0.0.0"

func main() { tfbridge.Main("docker", version, pulumidocker.Info(version), schema) }
