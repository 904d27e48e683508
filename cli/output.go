package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// outputFormat is the -o flag of the commands that print structured data
// (version, eval, validate): text (each command's own, the default), json
// or yaml. It is a pflag.Value, so a bad value is refused while flags are
// parsed, as a usage error naming the flag and the allowed values.
type outputFormat string

const (
	outputText outputFormat = "text"
	outputJSON outputFormat = "json"
	outputYAML outputFormat = "yaml"
)

var outputFormats = []outputFormat{outputText, outputJSON, outputYAML}

func (o *outputFormat) String() string { return string(*o) }
func (o *outputFormat) Type() string   { return "format" }

func (o *outputFormat) Set(v string) error {
	for _, f := range outputFormats {
		if v == string(f) {
			*o = f
			return nil
		}
	}
	names := make([]string, len(outputFormats))
	for i, f := range outputFormats {
		names[i] = string(f)
	}
	return fmt.Errorf("-o must be one of %s", strings.Join(names, ", "))
}

// registerOutput adds -o/--output to cmd, defaulting to text.
func registerOutput(cmd *cobra.Command, o *outputFormat) {
	*o = outputText
	cmd.Flags().VarP(o, "output", "o", "output format: text, json or yaml")
}

// writeStructured writes v as one JSON object on a line, or as YAML (the
// same fields, converted from that JSON so both name them alike).
func writeStructured(w io.Writer, format outputFormat, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding the output: %w", err)
	}
	return writeJSONAs(w, format, data)
}

// writeJSONAs writes data, one JSON value, as format: YAML for yaml, the
// JSON itself on one line otherwise.
func writeJSONAs(w io.Writer, format outputFormat, data []byte) error {
	if format == outputYAML {
		y, err := yaml.JSONToYAML(data)
		if err != nil {
			return fmt.Errorf("encoding the output as YAML: %w", err)
		}
		_, err = w.Write(y)
		return err
	}
	_, err := w.Write(append(data, '\n'))
	return err
}
