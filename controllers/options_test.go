package controllers

import (
	"strings"
	"testing"
)

func TestOptionsValidate(t *testing.T) {
	good := []Options{{}, {ConfigMapName: "bundle"}, {ConfigMapName: "a.b-c"}}
	for _, o := range good {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	bad := map[string]Options{
		"upper case":    {ConfigMapName: "Bundle"},
		"slash":         {ConfigMapName: "a/b"},
		"too long":      {ConfigMapName: strings.Repeat("a", 254)},
		"negative size": {MaxStoredBytes: -1},
	}
	for name, o := range bad {
		if err := o.Validate(); err == nil {
			t.Errorf("%s: %+v accepted", name, o)
		}
	}
}
