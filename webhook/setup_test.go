package webhook

import (
	"bytes"
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestRotatorInjectedItsCA(t *testing.T) {
	var s corev1.Secret
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: certSecret}, &s); err != nil {
		t.Fatal(err)
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Name: "validating-webhook-configuration"}, &vwc); err != nil {
		t.Fatal(err)
	}
	// Each validating webhook reviews one kind; the freezes have none, so
	// the kill switch works with the webhooks down.
	validated := map[string]bool{"policies": true, "clusterpolicies": true, "policyexceptions": true}
	for _, w := range vwc.Webhooks {
		if len(s.Data["ca.crt"]) == 0 || !bytes.Equal(w.ClientConfig.CABundle, s.Data["ca.crt"]) {
			t.Errorf("webhook %s: caBundle is not the rotator's CA (secret has %d bytes of CA)", w.Name, len(s.Data["ca.crt"]))
		}
		if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("webhook %s: failurePolicy must be Fail", w.Name)
		}
		for _, r := range w.Rules {
			if len(r.APIGroups) != 1 || r.APIGroups[0] != "toolgate.dev" || len(r.Resources) != 1 || !validated[r.Resources[0]] {
				t.Errorf("webhook %s matches more than one of toolgate.dev's policies, clusterpolicies, policyexceptions: %+v", w.Name, r.Rule)
			}
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	good := Options{CertMode: CertsSelfManaged, CertDir: "/certs", SecretNamespace: "toolgate-system",
		SecretName: "toolgate-webhook-certs", DNSName: "toolgate-webhook.toolgate-system.svc", ValidatingWebhookConfiguration: "toolgate"}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid options rejected: %v", err)
	}
	if err := (Options{CertMode: CertsProvided, CertDir: "/certs"}).Validate(); err != nil {
		t.Fatalf("provided certs need only a directory: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"unknown mode", func(o *Options) { o.CertMode = "auto" }, `certificate mode "auto"`},
		{"empty mode", func(o *Options) { o.CertMode = "" }, `certificate mode ""`},
		{"no secret", func(o *Options) { o.SecretName = "" }, "secret namespace and name"},
		{"no DNS name", func(o *Options) { o.DNSName = "" }, "service DNS name"},
		{"no webhook config", func(o *Options) { o.ValidatingWebhookConfiguration = "" }, "ValidatingWebhookConfiguration"},
		{"no cert dir", func(o *Options) { o.CertDir = "" }, "certificate directory"},
		{"negative exception days", func(o *Options) { o.MaxExceptionDays = -1 }, "positive number of days"},
	}
	for _, tt := range tests {
		o := good
		tt.mutate(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
}
