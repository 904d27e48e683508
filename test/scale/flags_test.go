package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseCounts(t *testing.T) {
	got, err := parseCounts("-namespaces", "1000, 10000")
	if err != nil || !slices.Equal(got, []int{1000, 10000}) {
		t.Fatalf("parseCounts: %v, %v", got, err)
	}
	for _, bad := range []string{"", "1000,", "ten", "0", "-5", "1000;10000", "1e3"} {
		for _, name := range []string{"-namespaces", "-floor"} {
			if _, err := parseCounts(name, bad); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("parseCounts(%s, %q): %v, want an error naming %s", name, bad, err, name)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := config{sizes: []int{1000}, perNamespace: 6, updates: 100, workers: 32}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		edit func(*config)
		want string
	}{
		{"too few objects", func(c *config) { c.perNamespace = 3 }, "-objects-per-namespace"},
		{"no updates", func(c *config) { c.updates = 0 }, "-updates"},
		{"more updates than namespaces", func(c *config) { c.sizes = []int{50} }, "-updates 100"},
		{"no workers", func(c *config) { c.workers = 0 }, "-workers"},
		{"base binary without its revision", func(c *config) { c.baseBin = "/tmp/toolgate" }, "-base-bin"},
		{"base last without a base", func(c *config) { c.baseLast = true }, "-base-last"},
		{"empty manager-args set", func(c *config) { c.variants = []string{"--max-concurrent-reconciles=4", " "} }, "set 2 of 2 is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			if err := c.validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("validate: %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
