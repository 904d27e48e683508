// Package crd embeds the CustomResourceDefinitions controller-gen writes to
// bases/, so a program can check objects against the very schema the API
// server serves instead of a copy of it.
package crd

import "embed"

// Bases holds bases/*.yaml, one CustomResourceDefinition per file.
//
//go:embed bases/*.yaml
var Bases embed.FS
