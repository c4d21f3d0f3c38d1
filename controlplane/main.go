// Command controlplane is a multi-call binary that runs one of etcd,
// kube-apiserver or kube-controller-manager, built from upstream sources.
//
// Each command is constructed only inside its own branch: the upstream
// commands register global feature gates and flag sets, and two of them in one
// process fail with "gates already added to a flag set". The Python side starts
// three processes of this binary.
package main

import (
	"fmt"
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

const usage = `usage: controlplane etcd|kube-apiserver|kube-controller-manager [ARGS...]
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	command, args := os.Args[1], os.Args[2:]
	switch command {
	case "etcd":
		etcdmain.Main(append([]string{"etcd"}, args...))
	case "kube-apiserver":
		cmd := apiserver.NewAPIServerCommand()
		cmd.SetArgs(args)
		os.Exit(cli.Run(cmd))
	case "kube-controller-manager":
		cmd := controllermanager.NewControllerManagerCommand()
		cmd.SetArgs(args)
		os.Exit(cli.Run(cmd))
	case "version":
		fmt.Println(version)
	default:
		fmt.Fprintf(os.Stderr, "controlplane: unknown command %q\n%s", command, usage)
		os.Exit(2)
	}
}
