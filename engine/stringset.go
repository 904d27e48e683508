package engine

// stringSet is a small list or, past a few members, a map: what in and
// not_in test against, and every list of names a gateway filter holds.
type stringSet struct {
	list []string
	set  map[string]struct{}
}

func newStringSet(items []string) stringSet {
	if len(items) <= 8 {
		return stringSet{list: items}
	}
	m := make(map[string]struct{}, len(items))
	for _, s := range items {
		m[s] = struct{}{}
	}
	return stringSet{set: m}
}

func (s *stringSet) has(x string) bool {
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

func (s *stringSet) empty() bool { return s.set == nil && s.list == nil }
