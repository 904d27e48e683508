package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// buildPython writes the Python client's sdist and wheel, version X.Y.Z in
// PEP 440's spelling (pep440), built by the backend its pyproject.toml names
// (pep517.py) from a copy whose [project] version is the release's.
func buildPython(o options) error {
	src, err := stage(filepath.Join(o.root, "clients", "python"), "__pycache__", "build", "dist")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	if err := stampPyproject(filepath.Join(src, "pyproject.toml"), pep440(o.version)); err != nil {
		return err
	}
	// The package says its version too (toolgate.__version__): the same.
	if err := stampDunderVersion(filepath.Join(src, "toolgate", "__init__.py"), pep440(o.version)); err != nil {
		return err
	}
	return runIn(src, "python3", filepath.Join(o.root, "hack", "release", "pep517.py"), src, o.dist)
}

// dunderVersion is the package's own version line.
var dunderVersion = regexp.MustCompile(`(?m)^__version__[ \t]*=[ \t]*"[^"]*"[ \t]*$`)

func stampDunderVersion(path, version string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if n := len(dunderVersion.FindAllIndex(b, -1)); n != 1 {
		return fmt.Errorf("clients/python/toolgate/__init__.py: %d __version__ lines, want one to set to %s", n, version)
	}
	return os.WriteFile(path, dunderVersion.ReplaceAllLiteral(b, []byte(`__version__ = "`+version+`"`)), 0o644)
}

// projectVersion is the version line of pyproject.toml's [project] table.
var projectVersion = regexp.MustCompile(`(?m)^version\s*=\s*"[^"]*"\s*$`)

func stampPyproject(path, version string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	head, project, ok := strings.Cut(string(b), "\n[project]\n")
	table, rest, more := strings.Cut(project, "\n[")
	if !ok || !projectVersion.MatchString(table) {
		return fmt.Errorf("clients/python/pyproject.toml: no static version in [project] to set to %s", version)
	}
	table = projectVersion.ReplaceAllLiteralString(table, `version = "`+version+`"`)
	out := head + "\n[project]\n" + table
	if more {
		out += "\n[" + rest
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

// packNPM writes the TypeScript client's npm tarball, version X.Y.Z: `npm
// pack` of a copy of the package built in place (make typescript-client, run
// by make release first), its version set by `npm pkg set`. Scripts are not
// run in the copy: it has no node_modules to build with, and is built.
func packNPM(o options) error {
	pkg := filepath.Join(o.root, "clients", "typescript")
	if _, err := os.Stat(filepath.Join(pkg, "dist", "index.js")); err != nil {
		return fmt.Errorf("the TypeScript client is not built (make typescript-client): %w", err)
	}
	src, err := stage(pkg, "node_modules")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	if err := runIn(src, "npm", "pkg", "set", "version="+o.version); err != nil {
		return err
	}
	return runIn(src, "npm", "pack", "--ignore-scripts", "--pack-destination", o.dist)
}

// stage copies the directory src to a new temporary one, leaving out
// directories with the names in skip, and returns it.
func stage(src string, skip ...string) (string, error) {
	dst, err := os.MkdirTemp("", "toolgate-release-")
	if err != nil {
		return "", err
	}
	err = filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir() && rel != "." && contains(skip, d.Name()):
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		return copyFile(path, target)
	})
	if err != nil {
		os.RemoveAll(dst)
		return "", err
	}
	return dst, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
