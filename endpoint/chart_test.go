package endpoint

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// chart is the Helm chart, which cannot import Go: its values repeat the
// contract.
var chart = filepath.Join("..", "charts", "toolgate")

// TestChartAgreesWithTheContract: the chart's defaults for the injected
// sidecar are DefaultSocket and DefaultAddress, and its schema refuses a
// socket path longer than MaxSocketPath (and accepts DefaultSocket).
func TestChartAgreesWithTheContract(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		SidecarInjection struct {
			Socket string `yaml:"socket"`
			Listen string `yaml:"listen"`
		} `yaml:"sidecarInjection"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	if got := values.SidecarInjection.Socket; got != DefaultSocket {
		t.Errorf("values.yaml sidecarInjection.socket is %q, DefaultSocket %q", got, DefaultSocket)
	}
	if got := values.SidecarInjection.Listen; got != DefaultAddress {
		t.Errorf("values.yaml sidecarInjection.listen is %q, DefaultAddress %q", got, DefaultAddress)
	}

	raw, err = os.ReadFile(filepath.Join(chart, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			SidecarInjection struct {
				Properties struct {
					Socket struct {
						MaxLength *int   `json:"maxLength"`
						Pattern   string `json:"pattern"`
					} `json:"socket"`
				} `json:"properties"`
			} `json:"sidecarInjection"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	socket := schema.Properties.SidecarInjection.Properties.Socket
	if socket.MaxLength == nil || *socket.MaxLength != MaxSocketPath {
		t.Errorf("values.schema.json sidecarInjection.socket maxLength is %v, MaxSocketPath %d", socket.MaxLength, MaxSocketPath)
	}
	if re, err := regexp.Compile(socket.Pattern); err != nil || !re.MatchString(DefaultSocket) {
		t.Errorf("values.schema.json sidecarInjection.socket pattern %q (%v) refuses DefaultSocket %q", socket.Pattern, err, DefaultSocket)
	}
}
