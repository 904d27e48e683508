package manager

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
)

// newSigningKeyCommand is `toolgate manager signing-key`: the rotation
// steps, run by an administrator against the key Secret.
func newSigningKeyCommand() *cobra.Command {
	var kubeconfig string
	var force bool
	s := SigningOptions{SecretName: bundle.SigningKeySecretName}
	cmd := &cobra.Command{
		Use:   "signing-key {list | add | promote KEY_ID | retire KEY_ID}",
		Short: "Show or rotate the bundle signing keys",
		Long: `Show or rotate the keys the operator signs bundles with. Every key in the Secret is
trusted: published in ` + bundle.SigningKeysConfigMapName + ` and given to sidecars injected afterwards;
the first one signs. Running managers watch the Secret and take each step within seconds:
no restart, and no agent Pod needs re-creating for the rotation itself. To rotate:

  add              a new key, trusted but not signing: Pods admitted from now on trust it
  promote KEY_ID   the new key signs; managers re-sign every bundle with it, endorsed by
                   the other keys, so sidecars admitted before add (which trust only the
                   old key) accept it
  retire KEY_ID    drop the old key. Refused while a bundle still carries its signature
                   (--force overrides). Afterwards bundles carry no endorsement by it:
                   sidecars that trust only the retired key refuse new bundles and keep
                   their last good one, so re-create the Pods admitted before add first.

If the Secret becomes invalid or is deleted, managers keep signing with the last valid
keys, emit a Warning event (` + v1alpha1.ReasonSigningKeysInvalid + `) on the Secret and set
toolgate_signing_keys_valid to 0.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			step, id := args[0], ""
			if len(args) == 2 {
				id = args[1]
			}
			want := map[string]int{"list": 1, RotateAdd: 1, RotatePromote: 2, RotateRetire: 2}[step]
			if want == 0 || len(args) != want {
				return fmt.Errorf("want list, add, promote KEY_ID or retire KEY_ID, not %q", args)
			}
			ns := s.namespace()
			if ns == "" {
				return fmt.Errorf("--namespace: the manager's namespace is required")
			}
			cmd.SilenceUsage = true
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), signingTimeout)
			defer cancel()
			var ring *bundle.Keyring
			if step == "list" {
				ring, err = EnsureSigningKeys(ctx, c, ns, s.SecretName)
			} else {
				ring, err = RotateSigningKeys(ctx, c, ns, s.SecretName, step, id, force)
			}
			if err != nil {
				return err
			}
			for i, k := range ring.Keys() {
				role := "trusted"
				if i == 0 {
					role = "signing"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", k.ID(), role)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&s.Namespace, "namespace", "n", "", "the manager's namespace (default: $POD_NAMESPACE)")
	cmd.Flags().StringVar(&s.SecretName, "signing-key-secret", s.SecretName, "the Secret holding the signing keys")
	cmd.Flags().BoolVar(&force, "force", false, "retire a key even while bundles still carry its signature")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, in-cluster config, then ~/.kube/config)")
	return cmd
}
