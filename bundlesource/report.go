package bundlesource

import (
	"slices"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// Report is what the sidecar serves, as its Lease tells the operator
// (v1alpha1.SidecarReport): the bundle revision, the freezes watched
// through the API that it applies, and the bundle it last refused since
// one last loaded.
type Report struct {
	// Revision is the bundle served, "" when none is.
	Revision string
	// Frozen names (v1alpha1.FreezeName) the namespace's FrozenAgents and
	// the ClusterFrozenAgents that select it, as the direct watches see
	// them; they apply from the moment a bundle is served (before, every
	// decision is denied anyway).
	Frozen []string
	// Rejected is the last refusal, newer than the bundle served; nil when
	// none is.
	Rejected *Rejection
}

// Report is what the sidecar serves now. It does not take the reload
// lock, so a bundle being compiled never holds it up.
func (l *Loader) Report() Report {
	r := Report{Revision: l.d.State().Revision, Rejected: l.rejected.Load()}
	if names := l.frozenNames.Load(); names != nil {
		r.Frozen = slices.Clone(*names)
	}
	return r
}

// SidecarReport is r as a Lease's annotations say it, for a sidecar of
// version: the refusal's reason is its kind and its error.
func (r Report) SidecarReport(version string) v1alpha1.SidecarReport {
	sr := v1alpha1.NewSidecarReport(r.Revision, r.Frozen, version)
	if r.Rejected != nil {
		sr.Refused(r.Rejected.Revision, r.Rejected.Reason+": "+r.Rejected.Error)
	}
	return sr
}

// setFrozenNames records the names of the freezes watched through the API
// and tells OnReportChanged when they changed. Called with mu held.
func (l *Loader) setFrozenNames(ns, cluster []string) {
	l.nsFrozenNames, l.clusterAppliedNames = ns, cluster
	names := slices.Concat(ns, cluster)
	slices.Sort(names)
	var before []string
	if old := l.frozenNames.Load(); old != nil {
		before = *old
	}
	if slices.Equal(before, names) {
		return
	}
	l.frozenNames.Store(&names)
	l.reportChanged()
}

func (l *Loader) reportChanged() {
	if l.cfg.OnReportChanged != nil {
		l.cfg.OnReportChanged()
	}
}
