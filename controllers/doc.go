// Package controllers publishes each namespace's Policies and FrozenAgents as
// one versioned bundle ConfigMap that sidecars load, and reports on every
// object whether it is live.
//
// Two controllers share the work. The bundle controller (one reconcile per
// namespace) builds the bundle with bundle.Build, checks it with
// engine.Compile and writes the ConfigMap; the status controller then writes
// each object's status from that outcome, apart, so that status writes never
// hold back the next publish. Neither decides anything itself: the bundle is
// the engine's input, and its diagnostics are the engine's.
//
// A third controller (approval_*.go) follows ApprovalRequests: it writes
// their Ready condition, emits their Events, counts them, POSTs a notice of
// each new one to a URL, and deletes them a retention after they finished.
// It never decides one: the decision is a person's status write.
package controllers
