// Package stringset is the set of names the engine tests a value against.
package stringset

// Set is a small list or, past a few members, a map: what in and
// not_in test against, and every list of names a gateway filter holds.
type Set struct {
	list []string
	set  map[string]struct{}
}

// New is the set of items; it keeps items when it is a list.
func New(items []string) Set {
	if len(items) <= 8 {
		return Set{list: items}
	}
	m := make(map[string]struct{}, len(items))
	for _, s := range items {
		m[s] = struct{}{}
	}
	return Set{set: m}
}

// Has tells whether x is a member.
func (s *Set) Has(x string) bool {
	if s.set != nil {
		_, ok := s.set[x]
		return ok
	}
	for _, y := range s.list {
		if y == x {
			return true
		}
	}
	return false
}

// Empty tells whether the set was made of nil items: a list that was
// absent, which filters nothing.
func (s *Set) Empty() bool { return s.set == nil && s.list == nil }
