// Package image checks the Dockerfile without a Docker engine: its shape
// (multi-stage, distroless, non-root, one entrypoint the injector relies
// on) and its build command, run as written, producing a static binary
// that carries the stamped version.
package image

import (
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/ociimage"
	"github.com/toolgate/toolgate/webhook"
)

const root = "../.."

type instruction struct{ cmd, args string }

// parse joins continuation lines and drops comments; enough for our file.
func parse(t *testing.T, path string) []instruction {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur += s + " "
			continue
		}
		cur += trimmed
		cmd, args, _ := strings.Cut(cur, " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur = ""
	}
	if cur != "" {
		t.Fatalf("%s ends inside a continued line", path)
	}
	return out
}

// finalStage is every instruction after the last FROM, and that FROM.
func finalStage(ins []instruction) (string, []instruction) {
	for i := len(ins) - 1; i >= 0; i-- {
		if ins[i].cmd == "FROM" {
			return ins[i].args, ins[i+1:]
		}
	}
	return "", nil
}

func TestDockerfileShape(t *testing.T) {
	ins := parse(t, filepath.Join(root, "Dockerfile"))
	froms := 0
	for _, in := range ins {
		if in.cmd == "FROM" {
			froms++
		}
	}
	if froms < 2 {
		t.Errorf("%d stages: want a build stage and a runtime stage", froms)
	}
	base, final := finalStage(ins)
	if !strings.HasPrefix(base, "gcr.io/distroless/static") || !strings.HasSuffix(base, ":nonroot") {
		t.Errorf("final stage FROM %q: want distroless static, nonroot", base)
	}
	got := map[string]string{}
	for _, in := range final {
		got[in.cmd] = in.args
	}
	if got["USER"] != "65532:65532" {
		t.Errorf("final USER %q: want 65532:65532 (the injected sidecar's runAsUser)", got["USER"])
	}
	// The injector's exec probes call this path.
	if want := `["` + webhook.SidecarBinary + `"]`; got["ENTRYPOINT"] != want {
		t.Errorf("ENTRYPOINT %s, want %s", got["ENTRYPOINT"], want)
	}
	if !strings.HasSuffix(got["COPY"], " "+webhook.SidecarBinary) {
		t.Errorf("final COPY %q does not install %s", got["COPY"], webhook.SidecarBinary)
	}
	if _, ok := got["RUN"]; ok {
		t.Errorf("the final stage runs %q, but distroless has no shell", got["RUN"])
	}

	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"bin/", ".git/"} {
		if !strings.Contains("\n"+string(ignore), "\n"+must+"\n") {
			t.Errorf(".dockerignore lacks %s: COPY . . would send it to the daemon", must)
		}
	}
}

func TestDockerfileBuildCommandMakesAStaticStampedBinary(t *testing.T) {
	var build string
	for _, in := range parse(t, filepath.Join(root, "Dockerfile")) {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			build = in.args
		}
	}
	if build == "" {
		t.Fatal("no RUN ... go build in the Dockerfile")
	}
	if !strings.Contains(build, "CGO_ENABLED=0") {
		t.Fatalf("build %q is not CGO_ENABLED=0", build)
	}
	out := filepath.Join(t.TempDir(), "toolgate")
	outFlag := regexp.MustCompile(`-o\s+/out/toolgate\b`)
	if !outFlag.MatchString(build) {
		t.Fatalf("build %q does not write /out/toolgate, which the final stage copies", build)
	}
	build = outFlag.ReplaceAllString(build, "-o "+out)
	cmd := exec.Command("sh", "-c", build)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VERSION=v9.9.9-image-test", "COMMIT=0123abc")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, b)
	}

	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader; distroless/static has none")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary links %q dynamically", libs)
	}

	v, err := exec.Command(out, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(v), "v9.9.9-image-test") || !strings.Contains(string(v), "0123abc") {
		t.Errorf("version: %q, %v; want the stamped version and commit", v, err)
	}
	// The same binary is the sidecar: its probe subcommand exists.
	if b, err := exec.Command(out, "sidecar", "probe", "--help").CombinedOutput(); err != nil {
		t.Errorf("sidecar probe --help: %v\n%s", err, b)
	}
}

// TestOCIArchiveIsTheFinalStage checks that the image `make image` and the
// real-node tests assemble without Docker (internal/ociimage) has the
// final stage's entrypoint and user, and nothing but the binary and
// distroless's files: no shell.
func TestOCIArchiveIsTheFinalStage(t *testing.T) {
	_, final := finalStage(parse(t, filepath.Join(root, "Dockerfile")))
	want := map[string]string{}
	for _, in := range final {
		want[in.cmd] = in.args
	}
	bin := filepath.Join(t.TempDir(), "toolgate")
	if err := os.WriteFile(bin, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "image.tar")
	if _, err := ociimage.Write(out, ociimage.Toolgate("toolgate.local/toolgate:x", bin)); err != nil {
		t.Fatal(err)
	}
	cfg, ref, err := ociimage.ReadConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if ref != "toolgate.local/toolgate:x" {
		t.Errorf("ref %q", ref)
	}
	ep, _ := json.Marshal(cfg.Config.Entrypoint)
	if string(ep) != strings.ReplaceAll(want["ENTRYPOINT"], `", "`, `","`) {
		t.Errorf("archive entrypoint %s, Dockerfile %s", ep, want["ENTRYPOINT"])
	}
	if cfg.Config.User != want["USER"] {
		t.Errorf("archive user %q, Dockerfile %q", cfg.Config.User, want["USER"])
	}
	for _, f := range ociimage.Toolgate("x", bin).Files {
		if strings.Contains(f.Path, "sh") && !strings.HasPrefix(f.Path, "/home") {
			t.Errorf("the image carries %s", f.Path)
		}
	}
}
