// CoreDNS for scripts/test-cluster.sh's cluster DNS, with only the plugins its Corefile uses: hosts answers
// from the file the tests write (re-read when it changes), template answers NXDOMAIN for every other name
// (nothing is forwarded: this machine has no internet), errors and log write to the pod's log. The set of
// plugins is CoreDNS' list of directives, set before coremain runs (its documented way of building with
// fewer plugins than core/plugin's all).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/template"
)

func init() {
	dnsserver.Directives = []string{"errors", "log", "hosts", "template"}
}

func main() {
	coremain.Run()
}
