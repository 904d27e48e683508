package main

import (
	"fmt"
	"regexp"
	"strings"
)

// tagPattern is a release tag: v and a SemVer 2.0 version without build
// metadata (X.Y.Z, optionally -pre.release).
var tagPattern = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// parseTag checks VERSION and returns X.Y.Z(-pre): the image tag, the
// chart's version and appVersion and the npm version (CHANGELOG.md's
// convention).
func parseTag(tag string) (string, error) {
	if !tagPattern.MatchString(tag) {
		return "", fmt.Errorf("VERSION=%q is not a release tag: want vX.Y.Z or vX.Y.Z-pre (SemVer with a leading v), e.g. VERSION=v0.1.0", tag)
	}
	return strings.TrimPrefix(tag, "v"), nil
}

// pythonPre maps SemVer pre-release labels PEP 440 knows to its spelling.
var pythonPre = regexp.MustCompile(`^(alpha|a|beta|b|rc|c)\.?(\d+)$`)

// pep440 is the Python package's version for X.Y.Z(-pre): PEP 440 has no
// SemVer pre-releases, so -rc.1, -beta.2, -alpha.3 become rc1, b2, a3, and
// any other label (v0.0.0-test) a local version (0.0.0+test), which pip
// installs but a package index refuses: only tags without a label or with
// one of those three are for publishing.
func pep440(version string) string {
	core, pre, ok := strings.Cut(version, "-")
	if !ok {
		return core
	}
	if m := pythonPre.FindStringSubmatch(pre); m != nil {
		return core + map[string]string{"alpha": "a", "a": "a", "beta": "b", "b": "b", "rc": "rc", "c": "rc"}[m[1]] + m[2]
	}
	return core + "+" + strings.NewReplacer("-", ".").Replace(pre)
}
