package approval

import "github.com/toolgate/toolgate/api/v1alpha1"

// RememberForTest gives a Store a view of ar as if it had just read or
// written it: a stale one, for the tests of Consume's conflicts.
func (s *Store) RememberForTest(ar *v1alpha1.ApprovalRequest) { s.remember(ar) }
