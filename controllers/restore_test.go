package controllers_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestHandEditedBundleIsRestored(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{}, ns)
	b := settled(t, ns)
	orig, _ := getBundleConfigMap(t, ns)
	want := orig.Data[bundle.Key]

	edits := map[string]func(cm *corev1.ConfigMap){
		"data replaced": func(cm *corev1.ConfigMap) {
			cm.Data[bundle.Key] = `{"schemaVersion":1,"policies":[],"frozenAgents":[]}`
		},
		"revision annotation changed": func(cm *corev1.ConfigMap) {
			cm.Annotations[v1alpha1.RevisionAnnotation] = "sha256:0"
		},
		"extra key added":  func(cm *corev1.ConfigMap) { cm.Data["extra.json"] = "{}" },
		"labels removed":   func(cm *corev1.ConfigMap) { cm.Labels = nil },
		"gzip copy added":  func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{bundle.GzipKey: {1, 2, 3}} },
		"document emptied": func(cm *corev1.ConfigMap) { cm.Data = nil },
	}
	for name, edit := range edits {
		cm, _ := getBundleConfigMap(t, ns)
		edit(cm)
		if err := k8s.Update(context.Background(), cm); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		edited := cm.ResourceVersion
		testenv.Eventually(t, name+": restored", func() (bool, string) {
			cm, found := getBundleConfigMap(t, ns)
			if !found {
				return false, "gone"
			}
			_, err := testenv.DecodeBundle(cm)
			ok := cm.ResourceVersion != edited && err == nil && len(cm.Data) == 1 && len(cm.BinaryData) == 0 &&
				cm.Data[bundle.Key] == want && cm.Annotations[v1alpha1.RevisionAnnotation] == b.Revision
			return ok, cm.ResourceVersion + " " + cm.Annotations[v1alpha1.RevisionAnnotation]
		})
	}

	// Deleted by hand: recreated, same revision.
	cm, _ := getBundleConfigMap(t, ns)
	if err := k8s.Delete(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "deleted bundle recreated", func() (bool, string) {
		cm, found := getBundleConfigMap(t, ns)
		if !found {
			return false, "not yet"
		}
		return cm.UID != orig.UID && cm.Data[bundle.Key] == want, "different content"
	})
}
