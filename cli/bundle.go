package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/atomicfile"
	"github.com/toolgate/toolgate/internal/exitcode"
)

// BundleOptions are the flags of `toolgate bundle`.
type BundleOptions struct {
	sourceFlags
	// Now decides which freezes have expired; empty means the real clock.
	Now string
	// Out is the file the bundle is written to; empty or "-": stdout.
	Out string
	// SigningKey is a PEM file of Ed25519 private keys (the format of the
	// manager's toolgate-signing-keys Secret): its first key signs the
	// bundle for -n's namespace, as the operator does.
	SigningKey string
}

func newBundleCommand() *cobra.Command {
	o := &BundleOptions{}
	cmd := &cobra.Command{
		Use:   "bundle -f PATH... [-n NAMESPACE] [-o FILE [--signing-key KEYS.pem]]",
		Short: "Print the bundle the operator would publish for these manifests",
		Long: "bundle prints the exact bundle document (the bundle.json the operator publishes for the\n" +
			"namespace) built from the manifests by the operator's own function, byte for byte, with no\n" +
			"trailing newline. A sidecar can serve it with --bundle-file. Compile diagnostics go to stderr.\n" +
			"The pinned tool definitions of MCPUpstream manifests go in too: a sidecar serving the bundle\n" +
			"with --mcp-upstream NAME=URL enforces the pins of the MCPUpstream named NAME (docs/pinning.md).\n\n" +
			"With --signing-key it also signs it as the operator does, for a sidecar started with\n" +
			"--trusted-keys and --bundle-namespace: the signature goes to FILE.sig beside -o FILE, and\n" +
			"while the key file holds more than one key, the first key's endorsements by the others go\n" +
			"to FILE.endorsements. The signature's counter continues from the FILE.sig already there, so\n" +
			"sidecars never take the new bundle for a rollback, and an unchanged bundle keeps its\n" +
			"signature. Each file is replaced whole; the signature is written first, so a sidecar that\n" +
			"reads between the two may refuse once, keep its bundle, and load the pair at the next change.",
		Example: "  toolgate bundle -f config/samples -n agents > bundle.json\n" +
			"  toolgate bundle -f policies/ -n agents --signing-key keys.pem -o /etc/toolgate/bundle.json",
		RunE: func(cmd *cobra.Command, args []string) error {
			o.addArgs(args)
			return runBundle(cmd, o, streamsOf(cmd))
		},
	}
	o.register(cmd, true)
	cmd.Flags().StringVar(&o.Now, "now", "", "leave out freezes expired at this RFC 3339 time instead of now")
	cmd.Flags().StringVarP(&o.Out, "output", "o", "", "write the bundle to this file instead of stdout (replaced whole)")
	cmd.Flags().StringVar(&o.SigningKey, "signing-key", "", "sign the bundle for -n's namespace with the first key of this PEM file of Ed25519 private keys, as the operator does (needs -n and -o)")
	return cmd
}

func runBundle(cmd *cobra.Command, o *BundleOptions, s streams) error {
	if err := o.check(cmd); err != nil {
		return err
	}
	toStdout := o.Out == "" || o.Out == "-"
	var ring *bundle.Keyring
	if o.SigningKey != "" {
		switch {
		case o.Namespace == "":
			return exitcode.Usagef("%s: --signing-key needs -n NAMESPACE: a signature names the namespace its bundle is for (the sidecar's --bundle-namespace)", cmd.CommandPath())
		case toStdout:
			return exitcode.Usagef("%s: --signing-key needs -o FILE: the signature is written beside the bundle, as FILE.sig", cmd.CommandPath())
		}
		keys, err := os.ReadFile(o.SigningKey)
		if err != nil {
			return exitcode.Usagef("%s: --signing-key: %v", cmd.CommandPath(), err)
		}
		if ring, err = bundle.ParseKeyring(keys); err != nil {
			return exitcode.Usagef("%s: --signing-key %s: %v", cmd.CommandPath(), o.SigningKey, err)
		}
	}
	if !toStdout {
		if info, err := os.Stat(o.Out); err == nil && info.IsDir() {
			return exitcode.Usagef("%s: -o %s is a directory; the bundle is written to a file", cmd.CommandPath(), o.Out)
		}
	}
	now, err := parseNow(o.Now)
	if err != nil {
		return err
	}
	set, b, err := loadBundle(&o.sourceFlags, s.in, now)
	if err != nil {
		return err
	}
	compileBundle(set, b, s.err)
	doc, revision, err := engine.Encode(b)
	if err != nil {
		return fmt.Errorf("encoding the bundle: %w", err)
	}
	if toStdout {
		_, err = s.out.Write(doc)
		return err
	}
	if ring != nil {
		if err := writeSeal(o.Out, ring, o.Namespace, revision); err != nil {
			return err
		}
	}
	if err := atomicfile.Write(o.Out, doc, 0o644); err != nil {
		return fmt.Errorf("writing the bundle: %w", err)
	}
	return nil
}

// writeSeal writes out's signature (out.sig, sealed from the one there)
// and its endorsements (out.endorsements; removed when the ring has one
// key, so none is left of an earlier ring): the files a sidecar's
// --bundle-file reads beside the bundle.
func writeSeal(out string, ring *bundle.Keyring, namespace, revision string) error {
	prev, err := os.ReadFile(out + ".sig")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading the signature there: %w", err)
	}
	if err := atomicfile.Write(out+".sig", ring.Seal(namespace, revision, prev, time.Now()), 0o644); err != nil {
		return fmt.Errorf("writing the signature: %w", err)
	}
	if e := ring.Endorsements(); e != nil {
		err = atomicfile.Write(out+".endorsements", e, 0o644)
	} else if err = os.Remove(out + ".endorsements"); errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("writing the endorsements: %w", err)
	}
	return nil
}
