// bundle-validate runs operator-framework/api's validators on an OLM registry+v1
// bundle directory, as `operator-sdk bundle validate` does: the CSV, CRD and bundle
// validators (the defaults) and the object validator (PodDisruptionBudgets,
// PriorityClasses, RBAC). It prints one line per finding and exits 1 on an error.
//
// Usage: bundle-validate BUNDLE_DIR
//
// operator-framework/api v0.9.1 is the version the Go module proxy reachable here
// serves; its registry+v1 checks are the ones OLM still applies.
package main

import (
	"fmt"
	"os"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: bundle-validate BUNDLE_DIR")
		os.Exit(2)
	}
	bundle, err := manifests.GetBundleFromDir(os.Args[1])
	if err != nil {
		fmt.Printf("error: %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	validators := append(interfaces.Validators{}, validation.DefaultBundleValidators...)
	validators = append(validators, validation.ObjectValidator)
	objects := []interface{}{bundle, bundle.CSV}
	for _, crd := range bundle.V1CRDs {
		objects = append(objects, crd)
	}
	for _, obj := range bundle.Objects {
		objects = append(objects, obj)
	}
	failed := false
	for _, result := range validators.Validate(objects...) {
		for _, finding := range result.Errors {
			failed = true
			fmt.Printf("error: %s: %s\n", result.Name, finding.Error())
		}
		for _, finding := range result.Warnings {
			fmt.Printf("warning: %s: %s\n", result.Name, finding.Error())
		}
	}
	if failed {
		os.Exit(1)
	}
	fmt.Printf("valid: %s (%d CRDs, %d objects)\n", os.Args[1], len(bundle.V1CRDs), len(bundle.Objects))
}
