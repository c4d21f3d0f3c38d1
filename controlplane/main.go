// Command controlplane is a multi-call binary that runs one of etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler or kubelet, built
// from upstream sources.
//
// Each command is constructed only inside its own branch: the upstream
// commands register global feature gates and flag sets, and two of them in one
// process fail with "gates already added to a flag set". The Python side starts
// one process of this binary per component.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

const usage = `usage: controlplane etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet [ARGS...]
`

func run(cmd *cobra.Command, args []string) {
	cmd.SetArgs(args)
	os.Exit(cli.Run(cmd))
}

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
		run(apiserver.NewAPIServerCommand(), args)
	case "kube-controller-manager":
		run(controllermanager.NewControllerManagerCommand(), args)
	case "kube-scheduler":
		run(scheduler.NewSchedulerCommand(), args)
	case "kubelet":
		run(kubelet.NewKubeletCommand(context.Background()), args)
	case "version":
		fmt.Println(version)
	default:
		fmt.Fprintf(os.Stderr, "controlplane: unknown command %q\n%s", command, usage)
		os.Exit(2)
	}
}
