// Package manifest reads Policy and FrozenAgent manifests
// (toolgate.dev/v1alpha1) from files and directories the way kubectl would
// send them to the API server: multi-document YAML or JSON, decoded strictly,
// with the CRD defaults applied and checked against the CRD schema as the API
// server checks it (internal/crdschema). Every problem names its file,
// document and field, and every object keeps its source so later diagnostics
// can too.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Stdin is the path that reads standard input.
const Stdin = "-"

// Load reads every path: a file (any extension), a directory (recursively, the
// files ending in .yaml, .yml or .json) or Stdin. It returns what it could
// load together with Errors listing every problem; an empty directory holds
// no objects and is not an error. The same name twice for one kind in one
// namespace is an error. Set.Skipped lists the files of directories that were
// not manifests.
func Load(paths []string, stdin io.Reader) (*Set, error) {
	return LoadWith(paths, stdin, Options{})
}

// Options change what Load accepts.
type Options struct {
	// SkipOtherKinds counts objects of other API groups (a Deployment, a
	// ConfigMap) in Set.OtherKinds instead of refusing them, so the output of
	// `kustomize build` for a whole application can be read. Objects of
	// toolgate.dev are read as always: a misspelt kind or version there is
	// still an error.
	SkipOtherKinds bool
}

// LoadWith is Load with options.
func LoadWith(paths []string, stdin io.Reader, opts Options) (*Set, error) {
	s := &Set{opts: opts}
	var errs Errors
	stdinRead := false
	for _, p := range paths {
		if p == Stdin {
			if stdinRead {
				errs = append(errs, &Error{Source: Source{File: "<stdin>"}, Message: "standard input given more than once", Unreadable: true})
				continue
			}
			stdinRead = true
			data, err := io.ReadAll(stdin)
			if err != nil {
				errs = append(errs, unreadable("<stdin>", err))
				continue
			}
			s.addFile("<stdin>", data, false, false, &errs)
			continue
		}
		s.loadPath(p, &errs)
	}
	errs = append(errs, s.Duplicates()...)
	return s, errs.orNil()
}

func (s *Set) loadPath(path string, errs *Errors) {
	info, err := os.Stat(path)
	if err != nil {
		*errs = append(*errs, unreadable(path, err))
		return
	}
	if !info.IsDir() {
		s.readFile(path, false, errs)
		return
	}
	walkErr := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			*errs = append(*errs, unreadable(p, err))
			if d != nil && d.IsDir() && p != path {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir() || !isManifestName(p):
		case isKustomization(p) || IsTestFile(p):
			// kustomize's own file lists the manifests next to it, and a
			// `toolgate test` file the cases for them; neither is one.
			s.Skipped = append(s.Skipped, p)
		default:
			s.readFile(p, true, errs)
		}
		return nil
	})
	if walkErr != nil {
		*errs = append(*errs, unreadable(path, walkErr))
	}
}

// TestFileSuffix ends the name of a `toolgate test` file
// (payments.toolgate-test.yaml): a directory of manifests may keep its
// tests beside them.
const TestFileSuffix = "toolgate-test.yaml"

// IsTestFile tells whether p is named as a `toolgate test` file.
func IsTestFile(p string) bool { return strings.HasSuffix(filepath.Base(p), TestFileSuffix) }

func isKustomization(p string) bool {
	switch filepath.Base(p) {
	case "kustomization.yaml", "kustomization.yml":
		return true
	}
	return false
}

func isManifestName(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

func (s *Set) readFile(path string, inDir bool, errs *Errors) {
	data, err := os.ReadFile(path)
	if err != nil {
		*errs = append(*errs, unreadable(path, err))
		return
	}
	s.addFile(path, data, strings.EqualFold(filepath.Ext(path), ".json"), inDir, errs)
}

// jsonDoc is one document converted to JSON, or the error that stopped it.
type jsonDoc struct {
	src  Source
	data []byte
	err  *Error
}

// addFile decodes every document of a file. A file found by walking a
// directory that holds only objects with none of apiVersion, kind, metadata
// and spec (test requests kept next to policies, say) is not a manifest: it
// is recorded in Skipped instead. A file named explicitly is never skipped.
func (s *Set) addFile(name string, data []byte, isJSON, inDir bool, errs *Errors) {
	docs := documents(name, data, isJSON)
	if inDir && notManifests(docs) {
		s.Skipped = append(s.Skipped, name)
		return
	}
	for _, d := range docs {
		if d.err != nil {
			*errs = append(*errs, d.err)
			continue
		}
		s.addDocument(d.src, d.data, errs)
	}
}

// documents splits a file and converts each document to JSON. Input that
// looks like JSON is read as a JSON stream; if it is not one (YAML flow
// style), and the file is not named .json, it is read as YAML.
func documents(name string, data []byte, isJSON bool) []jsonDoc {
	var out []jsonDoc
	source := func(index, line int) Source { return Source{File: name, Doc: index, Line: line, Item: -1} }
	addSplitError := func(err error) {
		var se *splitError
		if errors.As(err, &se) {
			out = append(out, jsonDoc{err: &Error{Source: source(se.index, se.line), Message: se.msg}})
		}
	}
	if isJSON || looksLikeJSON(data) {
		docs, err := splitJSON(data)
		if err == nil || isJSON {
			for _, d := range docs {
				out = append(out, jsonDoc{src: source(d.index, d.line), data: d.data})
			}
			addSplitError(err)
			return out
		}
	}
	docs, err := splitYAML(data)
	for _, d := range docs {
		src := source(d.index, d.line)
		j, convErr := yaml.YAMLToJSONStrict(d.data)
		if convErr != nil {
			out = append(out, jsonDoc{src: src, err: &Error{Source: src, Message: yamlMessage(convErr, d.line)}})
			continue
		}
		out = append(out, jsonDoc{src: src, data: j})
	}
	addSplitError(err)
	return out
}

// notManifests is true when every document parsed and at least one is an
// object with none of the fields a Kubernetes manifest has.
func notManifests(docs []jsonDoc) bool {
	found := false
	for _, d := range docs {
		if d.err != nil {
			return false
		}
		t := bytes.TrimSpace(d.data)
		if len(t) == 0 || string(t) == "null" {
			continue
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(t, &fields) != nil {
			return false
		}
		for _, k := range []string{"apiVersion", "kind", "metadata", "spec"} {
			if _, ok := fields[k]; ok {
				return false
			}
		}
		found = true
	}
	return found
}

func unreadable(path string, err error) *Error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &Error{Source: Source{File: path}, Message: "cannot read: " + err.Error(), Unreadable: true}
}
