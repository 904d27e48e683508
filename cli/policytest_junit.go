package cli

import (
	"encoding/xml"
	"os"
	"strings"
)

// The JUnit XML that CI systems read (Jenkins, GitLab, GitHub Actions'
// reporters): one testsuite per test file, one testcase per case, a
// failure element holding the fields that differ.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	File     string      `xml:"file,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// writeJUnit writes outcomes to path as JUnit XML.
func writeJUnit(path string, outcomes []fileOutcome) error {
	doc := junitSuites{}
	for _, f := range outcomes {
		name := f.name
		if name == "" {
			name = f.path
		}
		s := junitSuite{Name: name, File: f.path}
		for _, c := range f.cases {
			jc := junitCase{Name: c.name, Classname: name}
			if len(c.diffs) > 0 {
				jc.Failure = &junitFailure{Message: c.diffs[0], Text: strings.Join(c.diffs, "\n")}
				s.Failures++
			}
			s.Cases = append(s.Cases, jc)
			s.Tests++
		}
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Suites = append(doc.Suites, s)
	}
	out, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(out, '\n')...), 0o644)
}
