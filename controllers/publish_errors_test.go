package controllers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestPublishRetryable: the errors client-go returns for a write the API
// server may accept on a later try are retryable; those that need a fix,
// and any the classifier does not know, are not.
func TestPublishRetryable(t *testing.T) {
	cms := schema.GroupResource{Resource: "configmaps"}
	put := func(err error) error {
		return &url.Error{Op: "Put", URL: "https://192.0.2.1/api/v1/configmaps", Err: err}
	}
	dial := func(errno syscall.Errno) error {
		return put(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)})
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"conflict", apierrors.NewConflict(cms, "toolgate-bundle", errors.New("modified")), true},
		{"server timeout", apierrors.NewServerTimeout(cms, "update", 1), true},
		{"timeout", apierrors.NewTimeoutError("request timed out", 1), true},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), true},
		{"internal error (a webhook that cannot be called)", apierrors.NewInternalError(errors.New(`failed calling webhook "x": connection refused`)), true},
		{"service unavailable", apierrors.NewServiceUnavailable("etcd leader changed"), true},
		{"unexpected 502", apierrors.NewGenericServerResponse(http.StatusBadGateway, "PUT", cms, "toolgate-bundle", "bad gateway", 0, true), true},
		{"gateway timeout", apierrors.NewGenericServerResponse(http.StatusGatewayTimeout, "PUT", cms, "toolgate-bundle", "", 0, true), true},
		{"wrapped by rewrite", fmt.Errorf("deleting immutable ConfigMap ns/toolgate-bundle to replace it: %w", apierrors.NewServiceUnavailable("x")), true},
		{"connection refused", dial(syscall.ECONNREFUSED), true},
		{"connection reset", put(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), true},
		{"unreachable network", dial(syscall.ENETUNREACH), true},
		{"EOF", put(io.EOF), true},
		{"context deadline", put(context.DeadlineExceeded), true},

		{"forbidden", apierrors.NewForbidden(cms, "toolgate-bundle", errors.New("no RBAC")), false},
		{"quota exceeded", apierrors.NewForbidden(cms, "toolgate-bundle", errors.New("exceeded quota: q")), false},
		{"an admission policy's denial", apierrors.NewForbidden(cms, "toolgate-bundle", errors.New("ValidatingAdmissionPolicy 'p' with binding 'b' denied request")), false},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "toolgate-bundle",
			field.ErrorList{field.Invalid(field.NewPath("data"), "x", "refused")}), false},
		{"request entity too large", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), false},
		{"bad request", apierrors.NewBadRequest("bad"), false},
		{"unauthorized", apierrors.NewUnauthorized("token expired"), false},
		{"not found", apierrors.NewNotFound(cms, "toolgate-bundle"), false},
		{"method not supported", apierrors.NewMethodNotSupported(cms, "update"), false},
		{"unknown certificate authority", put(x509.UnknownAuthorityError{}), false},
		{"TLS alert", put(&net.OpError{Op: "remote error", Err: tls.AlertError(42)}), false},
		{"canceled", put(context.Canceled), false},
		{"unknown error", errors.New("something else"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := publishRetryable(tt.err); got != tt.want {
				t.Errorf("publishRetryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
