// Package ociimage writes container images as OCI image layout archives
// without a Docker engine or a registry: per platform, one uncompressed
// layer of the given files and a config with the entrypoint and user; one
// platform (Write) or several under an image index (WriteIndex). `ctr
// images import`,
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
	// Arch is the GOARCH the files' binaries were built for (the image is
	// linux/Arch); empty means this machine's.
	Arch string
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
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
)

// Write writes img as an OCI image layout tar archive to out and returns
// its manifest digest. The archive is reproducible: same files, same bytes.
func Write(out string, img Image) (string, error) {
	m, err := img.manifest()
	if err != nil {
		return "", err
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": mediaIndex,
		"manifests": []descriptor{m.descriptor(refAnnotations(img.Ref))},
	})
	if err != nil {
		return "", err
	}
	return digest(m.manifest), writeLayout(out, index, m.blobs())
}

// WriteIndex writes one image for several platforms to out, as `docker
// buildx --output type=oci` does: index.json names ref and points at an
// image index whose manifests are images, one per Image (each Arch once).
// ctr and skopeo pull the platform they need from it. It returns the
// digest of that image index, the image's digest in a registry.
func WriteIndex(out, ref string, images []Image) (string, error) {
	if len(images) == 0 {
		return "", fmt.Errorf("image %s: no platforms", ref)
	}
	seen := map[string]bool{}
	var manifests []descriptor
	var blobs [][]byte
	for _, img := range images {
		m, err := img.manifest()
		if err != nil {
			return "", err
		}
		if seen[m.arch] {
			return "", fmt.Errorf("image %s: platform linux/%s given twice", ref, m.arch)
		}
		seen[m.arch] = true
		manifests = append(manifests, m.descriptor(nil))
		blobs = append(blobs, m.blobs()...)
	}
	nested, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": manifests})
	if err != nil {
		return "", err
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": mediaIndex,
		"manifests": []descriptor{{MediaType: mediaIndex, Digest: digest(nested), Size: int64(len(nested)), Annotations: refAnnotations(ref)}},
	})
	if err != nil {
		return "", err
	}
	return digest(nested), writeLayout(out, index, append(blobs, nested))
}

// refAnnotations name the image for containerd (the full ref) and for the
// OCI layout (its tag).
func refAnnotations(ref string) map[string]string {
	tag := ref
	if i := strings.LastIndex(tag, ":"); i > strings.LastIndex(tag, "/") {
		tag = tag[i+1:]
	}
	return map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag}
}

// platformManifest is one platform's image: its manifest, config and layer.
type platformManifest struct {
	arch                    string
	manifest, config, layer []byte
}

func (m platformManifest) blobs() [][]byte { return [][]byte{m.config, m.layer, m.manifest} }

func (m platformManifest) descriptor(annotations map[string]string) descriptor {
	return descriptor{MediaType: mediaManifest, Digest: digest(m.manifest), Size: int64(len(m.manifest)),
		Platform: map[string]string{"architecture": m.arch, "os": "linux"}, Annotations: annotations}
}

func (img Image) manifest() (platformManifest, error) {
	m := platformManifest{arch: img.Arch}
	if m.arch == "" {
		m.arch = runtime.GOARCH
	}
	var err error
	if m.layer, err = layerTar(img.Files); err != nil {
		return m, err
	}
	var cfg Config
	cfg.Architecture, cfg.OS = m.arch, "linux"
	cfg.Config.User, cfg.Config.Env, cfg.Config.Entrypoint, cfg.Config.Cmd = img.User, img.Env, img.Entrypoint, img.Cmd
	cfg.Config.WorkingDir, cfg.Config.Labels = img.WorkingDir, img.Labels
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = []string{digest(m.layer)}
	cfg.History = []map[string]string{{"created_by": "toolgate internal/ociimage"}}
	if m.config, err = json.Marshal(cfg); err != nil {
		return m, err
	}
	m.manifest, err = json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": mediaManifest,
		"config": descriptor{MediaType: mediaConfig, Digest: digest(m.config), Size: int64(len(m.config))},
		"layers": []descriptor{{MediaType: mediaLayer, Digest: digest(m.layer), Size: int64(len(m.layer))}},
	})
	return m, err
}

// writeLayout writes the OCI image layout archive: oci-layout, index.json
// and the blobs, each once, with fixed times so the bytes are reproducible.
func writeLayout(out string, index []byte, blobs [][]byte) error {
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
			return err
		}
	}
	if err := put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		return err
	}
	if err := put("index.json", index, 0o644); err != nil {
		return err
	}
	written := map[string]bool{}
	for _, b := range blobs {
		if name := blobPath(b); !written[name] {
			written[name] = true
			if err := put(name, b, 0o644); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
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
// root: a static, stripped binary stamped with version and commit, for this
// machine.
func BuildToolgate(root, out, version, commit string) error {
	return BuildToolgateFor(root, out, runtime.GOOS, runtime.GOARCH, version, commit)
}

// BuildToolgateFor is BuildToolgate for another platform (GOOS, GOARCH):
// the release's binaries and its image's are built by it.
func BuildToolgateFor(root, out, goos, goarch, version, commit string) error {
	cmd := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X github.com/toolgate/toolgate/cli.Version="+version+" -X github.com/toolgate/toolgate/cli.Commit="+commit,
		"-o", out, "./cmd/toolgate")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building toolgate for %s/%s: %w\n%s", goos, goarch, err, b)
	}
	return nil
}
