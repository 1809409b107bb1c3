// Package pulumidocker maps the upstream Terraform docker provider onto @pulumi/docker's package: the same
// tokens (module index, docker_image as RemoteImage) and property names, so the @pulumi/docker npm package the
// project pins drives this plugin as it drives Pulumi's release. scripts/pulumi-toolchain.sh builds it only
// where no docker plugin of that version is installed; it is not part of the project's TypeScript.
package pulumidocker

import (
	"unicode"

	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfbridge"
	shimv2 "github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfshim/sdk-v2"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/terraform-providers/terraform-provider-docker/shim"
)

const module = "index"

// resource is docker:index/<camelName>:<Name>, as pulumi-docker names its members.
func resource(name string) tokens.Type {
	file := string(unicode.ToLower(rune(name[0]))) + name[1:]
	return tokens.Type("docker:" + module + "/" + file + ":" + name)
}

func function(name string) tokens.ModuleMember {
	file := string(unicode.ToLower(rune(name[0]))) + name[1:]
	return tokens.ModuleMember("docker:" + module + "/" + file + ":" + name)
}

// Info is the bridge's description of the provider at the given version (the @pulumi/docker npm version).
func Info(version string) tfbridge.ProviderInfo {
	info := tfbridge.ProviderInfo{
		P:                shimv2.NewProvider(shim.NewProvider(version)),
		Name:             "docker",
		Version:          version,
		Description:      "A Pulumi package for interacting with Docker in Pulumi programs",
		Keywords:         []string{"pulumi", "docker"},
		License:          "Apache-2.0",
		Homepage:         "https://pulumi.io",
		Repository:       "https://github.com/pulumi/pulumi-docker",
		GitHubOrg:        "kreuzwerker",
		UpstreamRepoPath: "./upstream",
		Config: map[string]*tfbridge.SchemaInfo{
			"host": {Default: &tfbridge.DefaultInfo{Value: "unix:///var/run/docker.sock", EnvVars: []string{"DOCKER_HOST"}}},
			// One block per registry, yet the npm package names it in the singular.
			"registry_auth": {Name: "registryAuth", MaxItemsOne: tfbridge.False()},
		},
		Resources: map[string]*tfbridge.ResourceInfo{
			"docker_buildx_builder": {Tok: resource("BuildxBuilder")},
			"docker_config":         {Tok: resource("ServiceConfig")},
			"docker_container": {
				Tok: resource("Container"),
				// A container's name is fixed (the plan names it): the old one must go before the new one starts.
				DeleteBeforeReplace: true,
				Fields: map[string]*tfbridge.SchemaInfo{
					// One command, not a list of commands: not pluralised.
					"command":           {Name: "command"},
					"networks_advanced": {Name: "networksAdvanced"},
				},
			},
			"docker_image":          {Tok: resource("RemoteImage"), Fields: map[string]*tfbridge.SchemaInfo{"name": {Name: "name"}}},
			"docker_network":        {Tok: resource("Network")},
			"docker_plugin":         {Tok: resource("Plugin")},
			"docker_registry_image": {Tok: resource("RegistryImage")},
			"docker_secret":         {Tok: resource("Secret")},
			"docker_service":        {Tok: resource("Service")},
			"docker_tag":            {Tok: resource("Tag")},
			"docker_volume":         {Tok: resource("Volume")},
		},
		DataSources: map[string]*tfbridge.DataSourceInfo{
			"docker_image":                    {Tok: function("getRemoteImage")},
			"docker_logs":                     {Tok: function("getLogs")},
			"docker_network":                  {Tok: function("getNetwork")},
			"docker_plugin":                   {Tok: function("getPlugin")},
			"docker_registry_image":           {Tok: function("getRegistryImage")},
			"docker_registry_image_manifests": {Tok: function("getRegistryImageManifests")},
		},
	}
	info.SetAutonaming(255, "-")
	return info
}
