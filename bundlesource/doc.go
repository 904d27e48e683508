// Package bundlesource loads the sidecar's policy bundles, as OPA's
// plugins/bundle does for OPA. A Loader verifies each bundle against the
// trusted keys (once per load, never per decision), refuses a rollback to
// an older publish counter, compiles it and swaps it into a
// decide.Decider with the FrozenAgents watched through the API merged in,
// and keeps the last good one in a cache directory, served at start until
// the source answers. A corrupt or refused bundle is counted and
// remembered for /readyz while the last good one keeps serving.
//
// A Source feeds the Loader: the bundle ConfigMap watched through the API
// (with the FrozenAgents of its namespace and the ClusterFrozenAgents that
// select it, applied without the operator),
// a mounted ConfigMap volume, or a bundle document on disk, the last two
// watched with fsnotify and polled.
package bundlesource
