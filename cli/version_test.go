package cli

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/exitcode"
)

func TestResolveVersionFallsBackToBuildInfo(t *testing.T) {
	vcs := func(modified string) *debug.BuildInfo {
		return &debug.BuildInfo{
			Main: debug.Module{Path: "github.com/toolgate/toolgate", Version: "v0.0.0-20261202024338-f22602fabcde+dirty"},
			Settings: []debug.BuildSetting{
				{Key: "vcs", Value: "git"},
				{Key: "vcs.revision", Value: "f22602fabcde0123456789abcdef0123456789ab"},
				{Key: "vcs.time", Value: "2026-12-02T02:43:38Z"},
				{Key: "vcs.modified", Value: modified},
			},
		}
	}
	for _, tc := range []struct {
		name            string
		version, commit string
		info            *debug.BuildInfo
		want            buildVersion
	}{
		{"no build info", "dev", "dev", nil, buildVersion{version: "dev", commit: "dev"}},
		{"stamp wins", "v1.2.3", "abc123", vcs("true"), buildVersion{version: "v1.2.3", commit: "abc123"}},
		{"clean checkout", "dev", "dev", vcs("false"), buildVersion{
			version: "v0.0.0-20261202024338-f22602fabcde+dirty", commit: "f22602fabcde0123456789abcdef0123456789ab", commitTime: "2026-12-02T02:43:38Z"}},
		{"modified checkout", "dev", "dev", vcs("true"), buildVersion{
			version: "v0.0.0-20261202024338-f22602fabcde+dirty", commit: "f22602fabcde0123456789abcdef0123456789ab-dirty", commitTime: "2026-12-02T02:43:38Z"}},
		{"go install of a tag", "dev", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}},
			buildVersion{version: "v0.1.0", commit: "dev"}},
		{"devel without VCS", "dev", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.time", Value: "x"}}},
			buildVersion{version: "dev", commit: "dev"}},
	} {
		if got := resolveVersion(tc.version, tc.commit, tc.info); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestVersionRejectsUnknownFlags(t *testing.T) {
	if o := run(t, "", "version", "--bogus"); o.code != exitcode.Usage || !strings.Contains(o.stderr, "unknown flag: --bogus") {
		t.Errorf("version --bogus: exit %d, stderr %q", o.code, o.stderr)
	}
}
