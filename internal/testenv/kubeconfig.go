package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes data (a kubeconfig, or anything a test wants a
// process to read as one) to a new file and returns its path: a process
// is then configured through --kubeconfig or $KUBECONFIG as in real use.
func WriteKubeconfig(t testing.TB, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Kubeconfig is cfg's server, CA and credentials as a kubeconfig, for
// WriteKubeconfig.
func Kubeconfig(t testing.TB, cfg *rest.Config) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// KubeconfigAs is Kubeconfig impersonating user in groups (the
// kubeconfig's as and as-groups): a process that reads it acts as that
// user, with that user's RBAC and admission, as kubectl --as would.
func KubeconfigAs(t testing.TB, cfg *rest.Config, user string, groups ...string) []byte {
	t.Helper()
	kc, err := clientcmd.Load(Kubeconfig(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	kc.AuthInfos["envtest"].Impersonate = user
	kc.AuthInfos["envtest"].ImpersonateGroups = groups
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
