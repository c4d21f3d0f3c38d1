// kstatus-check: what sigs.k8s.io/cli-utils's kstatus (the library Argo CD's and Flux's
// health checks follow) makes of each object it is given, for ansible-operator's tests.
//
// Reads a JSON array of Kubernetes objects on stdin; writes a JSON array of
// {"status": "Current"|"InProgress"|"Failed"|..., "message": "..."} on stdout, in order.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type verdict struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	var objects []json.RawMessage
	if err := json.NewDecoder(os.Stdin).Decode(&objects); err != nil {
		fmt.Fprintf(os.Stderr, "kstatus-check: stdin is no JSON array of objects: %v\n", err)
		os.Exit(2)
	}
	verdicts := make([]verdict, 0, len(objects))
	for _, raw := range objects {
		// As the API machinery reads an object: integers as int64, not float64.
		object := &unstructured.Unstructured{}
		if err := object.UnmarshalJSON(raw); err != nil {
			fmt.Fprintf(os.Stderr, "kstatus-check: %v\n", err)
			os.Exit(2)
		}
		result, err := status.Compute(object)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kstatus-check: %v\n", err)
			os.Exit(1)
		}
		verdicts = append(verdicts, verdict{Status: result.Status.String(), Message: result.Message})
	}
	if err := json.NewEncoder(os.Stdout).Encode(verdicts); err != nil {
		os.Exit(1)
	}
}
