package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/rego"
)

// ExportOptions are the flags of `toolgate export rego`.
type ExportOptions struct {
	sourceFlags
	// Out is the bundle directory, or with Tar the .tar.gz file ("-":
	// stdout).
	Out string
	// Tar writes the gzipped tar OPA's bundle plugin loads instead of a
	// directory.
	Tar bool
	// Now decides which freezes have expired; empty means the real clock.
	Now string
	// BundleFile is a bundle document (what `toolgate bundle` prints and
	// the operator publishes) to export instead of manifests.
	BundleFile string
	// SigningKey is a PEM file of Ed25519 private keys (the operator's
	// toolgate-signing-key Secret's keys.pem): with Tar, its first key signs
	// the bundle for OPA (.signatures.json), as the operator does with
	// --publish-rego.
	SigningKey string
}

func newExportCommand() *cobra.Command {
	o := &ExportOptions{}
	cmd := &cobra.Command{
		Use:   "rego -f PATH... [-n NAMESPACE] -o DIR | --tar -o FILE|-",
		Short: "Write the namespace's bundle as an OPA bundle that decides as toolgate does",
		Long: "rego builds the namespace bundle from the manifests with the operator's function and writes\n" +
			"it as an OPA bundle: .manifest, toolgate/policy.rego (Rego v1, one rule per policy rule) and\n" +
			"data.json. `opa eval -b DIR data.toolgate.decision -i request.json` then gives the object\n" +
			"toolgate eval prints, less latencyMs and trace. With --tar it writes the bundle.tar.gz that\n" +
			"OPA's bundle plugin loads instead. Compile diagnostics go to stderr; what Rego cannot decide\n" +
			"exactly as the engine does is refused with an error naming it.",
		Example: "  toolgate export rego -f config/samples -o bundle/ && opa eval -b bundle/ data.toolgate.decision -i req.json\n" +
			"  toolgate export rego -f policies/ -n agents --tar -o bundle.tar.gz",
		RunE: func(cmd *cobra.Command, args []string) error {
			o.addArgs(args)
			return runExport(cmd, o, streamsOf(cmd))
		},
	}
	o.register(cmd, true)
	cmd.Flags().StringVarP(&o.Out, "output", "o", "", "bundle directory to write; with --tar, the .tar.gz file, or - for stdout (required)")
	cmd.Flags().BoolVar(&o.Tar, "tar", false, "write the gzipped tar OPA's bundle plugin loads instead of a directory")
	cmd.Flags().StringVar(&o.Now, "now", "", "leave out freezes expired at this RFC 3339 time instead of now")
	cmd.Flags().StringVar(&o.SigningKey, "signing-key", "", "with --tar, sign the bundle for OPA (.signatures.json, EdDSA) with the first key of this PEM file of Ed25519 private keys, as the operator does")
	cmd.Flags().StringVar(&o.BundleFile, "bundle-file", "", "export this bundle document (toolgate bundle's output, a ConfigMap's bundle.json) instead of manifests; - for stdin")
	return groupCommand("export", "Export a namespace's policies for other enforcers", "format", cmd)
}

func runExport(cmd *cobra.Command, o *ExportOptions, s streams) error {
	if o.BundleFile != "" {
		if len(o.Paths) > 0 || o.Namespace != "" || o.Now != "" {
			return exitcode.Usagef("%s: --bundle-file exports a built bundle: -f, -n and --now build one from manifests", cmd.CommandPath())
		}
	} else if err := o.check(cmd); err != nil {
		return err
	}
	switch {
	case o.Out == "":
		return exitcode.Usagef("%s: -o is required: the bundle directory, or with --tar the .tar.gz file (- for stdout)", cmd.CommandPath())
	case o.Out == "-" && !o.Tar:
		return exitcode.Usagef("%s: -o - writes to stdout, which only --tar can: a bundle directory is several files", cmd.CommandPath())
	case o.SigningKey != "" && !o.Tar:
		return exitcode.Usagef("%s: --signing-key signs the --tar bundle: a bundle directory is written unsigned", cmd.CommandPath())
	}
	var signer rego.Signer
	if o.SigningKey != "" {
		pemKeys, err := os.ReadFile(o.SigningKey)
		if err != nil {
			return exitcode.Usagef("%s: --signing-key: %v", cmd.CommandPath(), err)
		}
		ring, err := bundle.ParseKeyring(pemKeys)
		if err != nil {
			return exitcode.Usagef("%s: --signing-key %s: %v", cmd.CommandPath(), o.SigningKey, err)
		}
		signer = ring.Current()
	}
	b, err := exportedBundle(o, s)
	if err != nil {
		return err
	}
	out, err := rego.Export(b)
	if err != nil {
		return &exitcode.Error{Code: exitcode.Problems, Err: err}
	}
	if !o.Tar {
		if info, err := os.Stat(o.Out); err == nil && !info.IsDir() {
			return exitcode.Usagef("%s: -o %s is a file, not a directory (--tar writes a file)", cmd.CommandPath(), o.Out)
		}
		if err := out.WriteDir(o.Out); err != nil {
			return fmt.Errorf("writing the bundle: %w", err)
		}
		return nil
	}
	doc, err := out.Tar(signer)
	if err != nil {
		return fmt.Errorf("writing the bundle: %w", err)
	}
	if o.Out == "-" {
		_, err = s.out.Write(doc)
		return err
	}
	if info, err := os.Stat(o.Out); err == nil && info.IsDir() {
		return exitcode.Usagef("%s: -o %s is a directory; --tar writes a file", cmd.CommandPath(), o.Out)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return exitcode.Usagef("%s: -o %s: %v", cmd.CommandPath(), o.Out, err)
	}
	if err := os.WriteFile(o.Out, doc, 0o644); err != nil {
		return fmt.Errorf("writing the bundle: %w", err)
	}
	return nil
}

// exportedBundle is the bundle to export: the one --bundle-file names, or
// the one the operator would publish for the manifests, with its revision
// (so the Rego bundle and the JSON bundle name the same policies).
func exportedBundle(o *ExportOptions, s streams) (engine.Bundle, error) {
	if o.BundleFile != "" {
		doc, name, err := readFlagFile("--bundle-file", o.BundleFile, s.in)
		if err != nil {
			return engine.Bundle{}, err
		}
		b, err := engine.Decode(doc)
		if err != nil {
			return engine.Bundle{}, exitcode.Usagef("--bundle-file %s: %v", name, err)
		}
		return b, nil
	}
	now, err := parseNow(o.Now)
	if err != nil {
		return engine.Bundle{}, err
	}
	set, b, err := loadBundle(&o.sourceFlags, s.in, now)
	if err != nil {
		return engine.Bundle{}, err
	}
	compileBundle(set, b, s.err)
	if _, b.Revision, err = engine.Encode(b); err != nil {
		return engine.Bundle{}, fmt.Errorf("encoding the bundle: %w", err)
	}
	return b, nil
}
