package webhook

import (
	"fmt"
	"testing"

	celgo "github.com/google/cel-go/cel"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// compileEnforcePolicy compiles vap's variables and validations as the API
// server of Kubernetes major.minor compiles a policy it is given (the
// libraries of that version, new expressions), and returns every error.
func compileEnforcePolicy(t *testing.T, vap *admissionv1.ValidatingAdmissionPolicy, major, minor uint) []string {
	t.Helper()
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(version.MajorMinor(major, minor)))
	if err != nil {
		t.Fatal(err)
	}
	opts := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	var errs []string
	for _, v := range vap.Spec.Variables {
		res := compiler.CompileAndStoreVariable(celExpression{v.Name, v.Expression, []*celgo.Type{celgo.AnyType, celgo.DynType}}, opts, environment.NewExpressions)
		if res.Error != nil {
			errs = append(errs, fmt.Sprintf("variable %s: %v", v.Name, res.Error))
		}
	}
	for i, v := range vap.Spec.Validations {
		res := compiler.CompileCELExpression(celExpression{fmt.Sprint(i), v.Expression, []*celgo.Type{celgo.BoolType}}, opts, environment.NewExpressions)
		if res.Error != nil {
			errs = append(errs, fmt.Sprintf("validation %d: %v", i, res.Error))
		}
	}
	return errs
}

// celExpression is a policy's variable (any type) or validation (a bool)
// as the API server's plugin gives it to the compiler.
type celExpression struct {
	name, expression string
	types            []*celgo.Type
}

func (e celExpression) GetName() string            { return e.name }
func (e celExpression) GetExpression() string      { return e.expression }
func (e celExpression) ReturnTypes() []*celgo.Type { return e.types }
