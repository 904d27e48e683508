package manifest

import (
	"fmt"
	"strings"
)

// Source says where an object was read: the file (as given or as found in a
// directory), the 1-based document index in it and the document's first line.
// Item is the index in a List's items, or -1.
type Source struct {
	File string
	Doc  int
	Line int
	Item int
}

// String is "file:doc N", or the file alone when no document was read.
func (s Source) String() string {
	if s.Doc == 0 {
		return s.File
	}
	return fmt.Sprintf("%s:doc %d", s.File, s.Doc)
}

// Error is one problem with the input, located as precisely as known:
// "file:doc N: Kind/name: field: message".
type Error struct {
	Source  Source
	Kind    string
	Name    string
	Field   string
	Message string
	// Unreadable is set when a path could not be read at all, as opposed to
	// read and found wrong.
	Unreadable bool
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source.String())
	if e.Kind != "" {
		b.WriteString(": ")
		b.WriteString(e.Kind)
		if e.Name != "" {
			b.WriteString("/")
			b.WriteString(e.Name)
		}
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	return b.String()
}

// Errors is every problem found while loading, in input order.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unreadable reports whether any path could not be read.
func (es Errors) Unreadable() bool {
	for _, e := range es {
		if e.Unreadable {
			return true
		}
	}
	return false
}

func (es Errors) orNil() error {
	if len(es) == 0 {
		return nil
	}
	return es
}
