package webhook

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/cli"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestValidateAgreesWithTheAPIServer feeds every manifest of the validate
// corpus to `toolgate validate` (its real command) and creates it on this
// suite's API server, which has the CRDs and this package's webhook. Both
// must give the corpus file's verdict and name the same fields; the wording
// may differ.
func TestValidateAgreesWithTheAPIServer(t *testing.T) {
	for _, c := range testenv.ValidateCorpus(t) {
		t.Run(c.Name, func(t *testing.T) {
			cliAccept, cliFields, cliOut := validateWithCLI(t, c.Path)
			apiAccept, apiFields, apiErr := createOnAPIServer(t, c.Doc)
			if cliAccept != c.Accept || apiAccept != c.Accept {
				t.Fatalf("accepted: toolgate validate %v, API server %v, corpus %v\nvalidate:\n%s\nAPI server: %v",
					cliAccept, apiAccept, c.Accept, cliOut, apiErr)
			}
			if !slices.Equal(cliFields, c.Fields) || !slices.Equal(apiFields, c.Fields) {
				t.Errorf("fields named: toolgate validate %q, API server %q, corpus %q\nvalidate:\n%s\nAPI server: %v",
					cliFields, apiFields, c.Fields, cliOut, apiErr)
			}
		})
	}
}

// validateWithCLI runs `toolgate validate -f path` in process, as main does.
func validateWithCLI(t *testing.T, path string) (accepted bool, fields []string, stdout string) {
	t.Helper()
	root := cli.NewRootCommand()
	var out, errb bytes.Buffer
	root.SetArgs([]string{"validate", "-f", path})
	root.SetIn(strings.NewReader(""))
	root.SetOut(&out)
	root.SetErr(&errb)
	switch code := cli.Execute(root); code {
	case 0, exitcode.Problems:
		return code == 0, testenv.ProblemFields(t, out.String(), path), out.String()
	default:
		t.Fatalf("toolgate validate exited %d: %s%s", code, out.String(), errb.String())
		return false, nil, ""
	}
}

// createOnAPIServer creates the manifest as `kubectl apply` would (strict
// field validation) in namespace default, as a dry run so that no case
// depends on another, and returns the fields the rejection names.
func createOnAPIServer(t *testing.T, doc []byte) (accepted bool, fields []string, err error) {
	t.Helper()
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		t.Fatalf("corpus manifest is not YAML: %v", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil { // keeps integers int64, as kubectl sends them
		t.Fatal(err)
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(ns)
	}
	err = k8sClient.Create(context.Background(), u, client.DryRunAll, client.FieldValidation("Strict"))
	if err == nil {
		return true, nil, nil
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("create failed without an API status: %v", err)
	}
	switch code := status.Status().Code; code {
	case http.StatusUnprocessableEntity, http.StatusBadRequest:
	default:
		t.Fatalf("create failed with HTTP %d, not a rejection of the object: %v", code, err)
	}
	return false, rejectedFields(status), err
}

// A decoding error comes with no causes: it names its field only in its
// message, as unknown (strict field validation) or as the ObjectMeta field
// that does not decode.
var (
	unknownField = regexp.MustCompile(`unknown field "([^"]+)"`)
	badMetadata  = regexp.MustCompile(`Go struct field ObjectMeta\.(\w+) of type`)
)

// rejectedFields are the fields a rejection names: its causes' (without the
// API server's "<nil>" for a message about the whole object), else those its
// message names.
func rejectedFields(status apierrors.APIStatus) []string {
	s := status.Status()
	var fields []string
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			if f := strings.TrimPrefix(c.Field, "."); f != "" && f != "<nil>" {
				fields = append(fields, f)
			}
		}
	}
	if len(fields) == 0 {
		for _, m := range unknownField.FindAllStringSubmatch(s.Message, -1) {
			fields = append(fields, m[1])
		}
		for _, m := range badMetadata.FindAllStringSubmatch(s.Message, -1) {
			fields = append(fields, "metadata."+m[1])
		}
	}
	return testenv.Fields(fields)
}
