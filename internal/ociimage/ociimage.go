// Package ociimage writes container images as OCI image layout archives
// without a Docker engine or a registry: one uncompressed layer of the given
// files, and a config with the entrypoint and user. `ctr images import`,
// `kind load image-archive`, `skopeo copy oci-archive:` and `crane push`
// take them.
package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// File is one file or directory of the image's layer.
type File struct {
	Path string // absolute, in the image
	Mode int64
	Dir  bool
	// Data, or Source: a file on this machine to copy.
	Data   []byte
	Source string
}

// Image describes the image to write.
type Image struct {
	// Ref is the name containerd records (io.containerd.image.name), e.g.
	// toolgate.local/toolgate:test; its tag goes into
	// org.opencontainers.image.ref.name.
	Ref        string
	Files      []File
	Entrypoint []string
	Cmd        []string
	User       string
	Env        []string
	WorkingDir string
	Labels     map[string]string
}

// Config is the part of an OCI image config this package writes and reads.
type Config struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User       string            `json:"User,omitempty"`
		Env        []string          `json:"Env,omitempty"`
		Entrypoint []string          `json:"Entrypoint,omitempty"`
		Cmd        []string          `json:"Cmd,omitempty"`
		WorkingDir string            `json:"WorkingDir,omitempty"`
		Labels     map[string]string `json:"Labels,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []map[string]string `json:"history,omitempty"`
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    map[string]string `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

const (
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// Write writes img as an OCI image layout tar archive to out and returns
// its manifest digest. The archive is reproducible: same files, same bytes.
func Write(out string, img Image) (string, error) {
	layer, err := layerTar(img.Files)
	if err != nil {
		return "", err
	}
	var cfg Config
	cfg.Architecture, cfg.OS = runtime.GOARCH, "linux"
	cfg.Config.User, cfg.Config.Env, cfg.Config.Entrypoint, cfg.Config.Cmd = img.User, img.Env, img.Entrypoint, img.Cmd
	cfg.Config.WorkingDir, cfg.Config.Labels = img.WorkingDir, img.Labels
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = []string{digest(layer)}
	cfg.History = []map[string]string{{"created_by": "toolgate internal/ociimage"}}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": mediaManifest,
		"config": descriptor{MediaType: mediaConfig, Digest: digest(cfgJSON), Size: int64(len(cfgJSON))},
		"layers": []descriptor{{MediaType: mediaLayer, Digest: digest(layer), Size: int64(len(layer))}},
	})
	if err != nil {
		return "", err
	}
	tag := img.Ref
	if i := strings.LastIndex(tag, ":"); i > strings.LastIndex(tag, "/") {
		tag = tag[i+1:]
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []descriptor{{MediaType: mediaManifest, Digest: digest(manifest), Size: int64(len(manifest)),
			Platform:    map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
			Annotations: map[string]string{"io.containerd.image.name": img.Ref, "org.opencontainers.image.ref.name": tag}}},
	})
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	put := func(name string, b []byte, mode int64) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(b)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
			return "", err
		}
	}
	for _, f := range []struct {
		name string
		b    []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(cfgJSON), cfgJSON},
		{blobPath(layer), layer},
		{blobPath(manifest), manifest},
	} {
		if err := put(f.name, f.b, 0o644); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return digest(manifest), os.WriteFile(out, buf.Bytes(), 0o644)
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func blobPath(b []byte) string { return "blobs/sha256/" + strings.TrimPrefix(digest(b), "sha256:") }

func layerTar(files []File) ([]byte, error) {
	files = append([]File(nil), files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	seen := map[string]bool{}
	var parents func(p string) error
	parents = func(p string) error {
		dir := path.Dir(p)
		if dir == "/" || dir == "." || seen[dir] {
			return nil
		}
		if err := parents(dir); err != nil {
			return err
		}
		seen[dir] = true
		return tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(dir, "/") + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0), Format: tar.FormatPAX})
	}
	for _, f := range files {
		if !path.IsAbs(f.Path) {
			return nil, fmt.Errorf("image path %q is not absolute", f.Path)
		}
		if err := parents(f.Path); err != nil {
			return nil, err
		}
		name := strings.TrimPrefix(path.Clean(f.Path), "/")
		if f.Dir {
			if seen[path.Clean(f.Path)] {
				continue
			}
			seen[path.Clean(f.Path)] = true
			if err := tw.WriteHeader(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: f.Mode, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
			continue
		}
		data := f.Data
		if f.Source != "" {
			var err error
			if data, err = os.ReadFile(f.Source); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: f.Mode, Size: int64(len(data)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadConfig returns the image config of the (single) image in an archive
// Write wrote, with its ref name.
func ReadConfig(archive string) (Config, string, error) {
	var cfg Config
	b, err := os.ReadFile(archive)
	if err != nil {
		return cfg, "", err
	}
	entries := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		var data bytes.Buffer
		_, _ = data.ReadFrom(tr)
		entries[h.Name] = data.Bytes()
	}
	var index struct{ Manifests []descriptor }
	if err := json.Unmarshal(entries["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return cfg, "", fmt.Errorf("%s: index.json: want one manifest (%v)", archive, err)
	}
	var manifest struct{ Config descriptor }
	if err := json.Unmarshal(entries["blobs/sha256/"+strings.TrimPrefix(index.Manifests[0].Digest, "sha256:")], &manifest); err != nil {
		return cfg, "", err
	}
	err = json.Unmarshal(entries["blobs/sha256/"+strings.TrimPrefix(manifest.Config.Digest, "sha256:")], &cfg)
	return cfg, index.Manifests[0].Annotations["io.containerd.image.name"], err
}

// Passwd and Group are the /etc/passwd and /etc/group of distroless's
// static image: root, nobody and nonroot (65532).
const (
	Passwd = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	Group  = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
)

// Static is a distroless-static-like image around one static binary at
// binPath: /etc/passwd and /etc/group, /tmp, /home/nonroot, no shell.
func Static(ref, binary, binPath, user string) Image {
	return Image{
		Ref: ref,
		Files: []File{
			{Path: binPath, Mode: 0o755, Source: binary},
			{Path: "/etc/passwd", Mode: 0o644, Data: []byte(Passwd)},
			{Path: "/etc/group", Mode: 0o644, Data: []byte(Group)},
			{Path: "/tmp", Mode: 0o1777, Dir: true},
			{Path: "/home/nonroot", Mode: 0o755, Dir: true},
		},
		Entrypoint: []string{binPath},
		User:       user,
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	}
}

// The toolgate image's final stage, as the Dockerfile describes it (a test
// compares the two): the one static binary at /toolgate as the entrypoint,
// user 65532:65532 (distroless's nonroot), no shell.
const (
	ToolgateBinary = "/toolgate"
	ToolgateUser   = "65532:65532"
)

// Toolgate is the toolgate image around a static binary built as the
// Dockerfile's build stage does (BuildToolgate).
func Toolgate(ref, binary string) Image {
	return Static(ref, binary, ToolgateBinary, ToolgateUser)
}

// BuildToolgate runs the Dockerfile's build command in the repository at
// root: a static, stripped binary stamped with version and commit.
func BuildToolgate(root, out, version, commit string) error {
	cmd := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X github.com/toolgate/toolgate/cli.Version="+version+" -X github.com/toolgate/toolgate/cli.Commit="+commit,
		"-o", out, "./cmd/toolgate")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building toolgate: %w\n%s", err, b)
	}
	return nil
}
