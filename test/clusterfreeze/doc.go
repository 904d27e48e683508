// Package clusterfreeze measures the cluster's kill switch black-box: one
// ClusterFrozenAgent, created with no operator running, reaching 100 real
// sidecar processes in 100 namespaces through their own ClusterFrozenAgent
// watches. Its test has the build tag clusterfreeze (100 processes, about
// a minute): make test-cluster-freeze runs it, make measure-cluster-freeze
// prints the figures.
package clusterfreeze
