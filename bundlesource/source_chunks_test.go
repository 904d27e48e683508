package bundlesource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

const chunkNS = "agents"

// chunked is what the operator publishes for b in parts of partSize: the
// bundle ConfigMap (index and signatures) and the parts by name.
func chunked(t *testing.T, ring *bundle.Keyring, b engine.Bundle, partSize int, counterFrom time.Time) (*corev1.ConfigMap, map[string][]byte) {
	t.Helper()
	doc, rev := testenv.Encode(t, b)
	ix, parts, err := bundle.Split(bundle.DefaultConfigMapName, rev, testenv.Gzipped(t, doc), partSize)
	must(t, err)
	index := ix.Marshal()
	docSig := ring.Seal(chunkNS, rev, nil, counterFrom)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: chunkNS, Name: bundle.DefaultConfigMapName},
		Data: map[string]string{bundle.IndexKey: string(index), bundle.SignatureKey: string(docSig),
			bundle.IndexSignatureKey: string(ring.SealIndex(chunkNS, index, docSig, counterFrom))}}
	byName := map[string][]byte{}
	for i, p := range ix.Parts {
		byName[p.Name] = parts[i]
	}
	return cm, byName
}

func getter(parts map[string][]byte) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		p, ok := parts[name]
		if !ok {
			return nil, fmt.Errorf(`configmaps %q not found`, name)
		}
		return bytes.Clone(p), nil
	}
}

func newChunkLoader(t *testing.T, ring *bundle.Keyring) (*Loader, *decide.Decider, *Metrics) {
	t.Helper()
	d, err := decide.NewInProcess(decide.Config{})
	must(t, err)
	m := NewMetrics(prometheus.NewRegistry(), "toolgate_sidecar_")
	var trust *bundle.TrustedKeys
	if ring != nil {
		trust = ring.Trusted()
	}
	return New(Config{Trust: trust, Namespace: chunkNS}, d, m, nil), d, m
}

// A chunked bundle loads whole; every way its index or parts can be wrong
// is refused with its own reason while the last good bundle serves, and a
// sidecar with no bundle yet stays failing closed.
func TestChunkedBundleLoadsAndEveryMalformedOneIsRefused(t *testing.T) {
	ring := testenv.Keyring(t, 1)
	now := time.Now()
	good, goodParts := chunked(t, ring, testenv.DenyTools("Bash", "Write"), 100, now)
	if len(goodParts) < 3 {
		t.Fatalf("the test bundle makes %d parts; want at least 3", len(goodParts))
	}

	// No bundle yet: a broken chunked bundle leaves the sidecar denying.
	fresh, freshD, _ := newChunkLoader(t, ring)
	missing := map[string][]byte{}
	for k, v := range goodParts {
		missing[k] = v
	}
	delete(missing, bundle.PartName(bundle.DefaultConfigMapName, 2))
	if err := fresh.LoadChunkedConfigMap(good, getter(missing)); !errors.Is(err, bundle.ErrMissingPart) || freshD.Ready() {
		t.Fatalf("a missing part with no bundle yet: %v, ready %v; want ErrMissingPart and still no bundle", err, freshD.Ready())
	}

	l, d, m := newChunkLoader(t, ring)
	must(t, l.LoadChunkedConfigMap(good, getter(goodParts)))
	served := d.State().Revision
	if served == "" {
		t.Fatal("the chunked bundle did not load")
	}

	next, nextParts := chunked(t, ring, testenv.DenyTools("Read"), 100, now.Add(time.Second))
	edit := func(f func(cm *corev1.ConfigMap, parts map[string][]byte)) (*corev1.ConfigMap, map[string][]byte) {
		cm := next.DeepCopy()
		parts := map[string][]byte{}
		for k, v := range nextParts {
			parts[k] = bytes.Clone(v)
		}
		f(cm, parts)
		return cm, parts
	}
	part1, part2 := bundle.PartName(bundle.DefaultConfigMapName, 1), bundle.PartName(bundle.DefaultConfigMapName, 2)
	resign := func(cm *corev1.ConfigMap) { // an index the operator's key signed: only the parts are wrong
		cm.Data[bundle.IndexSignatureKey] = string(ring.SealIndex(chunkNS, []byte(cm.Data[bundle.IndexKey]), []byte(cm.Data[bundle.SignatureKey]), now))
	}
	for _, c := range []struct {
		name, reason, words string
		cm                  *corev1.ConfigMap
		parts               map[string][]byte
	}{
		{"missing part", ReasonMissingPart, "part 2", nil, nil},
		{"part changed", ReasonPartMismatch, "has sha256", nil, nil},
		{"part truncated", ReasonPartMismatch, "the index says", nil, nil},
		{"index not signed", ReasonUnsigned, "not signed", nil, nil},
		{"index signed by another key", ReasonUnknownKey, "not trusted", nil, nil},
		{"index forged", ReasonBadSignature, "does not verify", nil, nil},
		{"index malformed but signed", ReasonBadIndex, "is not an index document", nil, nil},
		{"size lie signed", ReasonBadIndex, "add up to", nil, nil},
		{"too many parts signed", ReasonBadIndex, "17 parts", nil, nil},
		{"parts of another bundle", ReasonPartMismatch, "reassemble to revision", nil, nil},
		{"index beside a document", ReasonBadIndex, "refusing to guess", nil, nil},
	} {
		switch c.name {
		case "missing part":
			c.cm, c.parts = edit(func(_ *corev1.ConfigMap, p map[string][]byte) { delete(p, part2) })
		case "part changed":
			c.cm, c.parts = edit(func(_ *corev1.ConfigMap, p map[string][]byte) { p[part1][0] ^= 0xff })
		case "part truncated":
			c.cm, c.parts = edit(func(_ *corev1.ConfigMap, p map[string][]byte) { p[part2] = p[part2][:1] })
		case "index not signed":
			c.cm, c.parts = edit(func(cm *corev1.ConfigMap, _ map[string][]byte) { delete(cm.Data, bundle.IndexSignatureKey) })
		case "index signed by another key":
			other := testenv.Keyring(t, 1)
			c.cm, c.parts = edit(func(cm *corev1.ConfigMap, _ map[string][]byte) {
				cm.Data[bundle.IndexSignatureKey] = string(other.SealIndex(chunkNS, []byte(cm.Data[bundle.IndexKey]), nil, now))
			})
		case "index forged":
			c.cm, c.parts = edit(func(cm *corev1.ConfigMap, _ map[string][]byte) {
				cm.Data[bundle.IndexKey] = strings.Replace(cm.Data[bundle.IndexKey], `"format":1`, `"format":1 `, 1)
			})
		case "index malformed but signed":
			c.cm, c.parts = edit(func(cm *corev1.ConfigMap, _ map[string][]byte) { cm.Data[bundle.IndexKey] = "parts: 3"; resign(cm) })
		case "size lie signed":
			c.cm, c.parts = edit(func(cm *corev1.ConfigMap, _ map[string][]byte) {
				var ix bundle.Index
				ix, _ = bundle.ParseIndex([]byte(cm.Data[bundle.IndexKey]), cm.Name)
				ix.Size++
				cm.Data[bundle.IndexKey] = string(ix.Marshal())
				resign(cm)
			})
		case "too many parts signed":
			c.cm, c.parts = edit(func(cm *corev1.ConfigMap, _ map[string][]byte) {
				ix := bundle.Index{Format: 1, Revision: "sha256:x", Size: bundle.MaxParts + 1}
				for i := range bundle.MaxParts + 1 {
					ix.Parts = append(ix.Parts, bundle.IndexPart{Name: bundle.PartName(cm.Name, i+1), SHA256: strings.Repeat("0", 64), Size: 1})
				}
				cm.Data[bundle.IndexKey] = string(ix.Marshal())
				resign(cm)
			})
		case "parts of another bundle":
			// A signed index naming the good bundle's parts, with the next
			// bundle's revision: the parts match their digests, the document
			// they make is not the one the index names.
			c.cm, c.parts = edit(func(cm *corev1.ConfigMap, _ map[string][]byte) {
				ix, _ := bundle.ParseIndex([]byte(good.Data[bundle.IndexKey]), cm.Name)
				ix.Revision = served + "0"
				cm.Data[bundle.IndexKey] = string(ix.Marshal())
				resign(cm)
			})
			c.parts = goodParts
		case "index beside a document":
			c.cm, c.parts = edit(func(cm *corev1.ConfigMap, _ map[string][]byte) { cm.Data[bundle.Key] = "{}" })
		}
		t.Run(c.name, func(t *testing.T) {
			before := testutil.ToFloat64(m.Rejected.WithLabelValues(c.reason))
			err := l.LoadChunkedConfigMap(c.cm, getter(c.parts))
			if err == nil || !strings.Contains(err.Error(), c.words) || RejectReason(err) != c.reason {
				t.Fatalf("err %v (reason %s); want reason %s saying %q", err, RejectReason(err), c.reason, c.words)
			}
			if got := testutil.ToFloat64(m.Rejected.WithLabelValues(c.reason)); got != before+1 {
				t.Errorf("toolgate_sidecar_bundle_rejected_total{reason=%q} = %v, want %v", c.reason, got, before+1)
			}
			if d.State().Revision != served || l.Rejected() == nil || l.Rejected().Reason != c.reason {
				t.Fatalf("serving %s (want the last good %s), last rejection %+v", d.State().Revision, served, l.Rejected())
			}
		})
	}

	// The next bundle, whole, loads; the good one again is a rollback.
	must(t, l.LoadChunkedConfigMap(next, getter(nextParts)))
	if d.State().Revision == served {
		t.Fatal("the next chunked bundle did not load")
	}
	if err := l.LoadChunkedConfigMap(good, getter(goodParts)); RejectReason(err) != ReasonRollback {
		t.Fatalf("the earlier chunked bundle again: %v, want a rollback refusal", err)
	}
}

// Without trusted keys the index is not signed, and the parts and the
// document are still checked.
func TestChunkedBundleWithoutTrustedKeys(t *testing.T) {
	ring := testenv.Keyring(t, 1)
	cm, parts := chunked(t, ring, testenv.DenyTools("Bash"), 64, time.Now())
	delete(cm.Data, bundle.IndexSignatureKey)
	delete(cm.Data, bundle.SignatureKey)
	l, d, _ := newChunkLoader(t, nil)
	must(t, l.LoadChunkedConfigMap(cm, getter(parts)))
	if !d.Ready() {
		t.Fatal("an unsigned chunked bundle did not load without trusted keys")
	}
}

// A mounted volume shows the index but not the parts: it is refused with
// a message pointing at the API source, not read as "no bundle".
func TestBundleDirWithAnIndexNamesTheAPISource(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, bundle.IndexKey), []byte(`{"format":1}`), 0o644))
	_, _, _, found, err := readBundleDir(dir)
	if !errors.Is(err, bundle.ErrBadIndex) || !strings.Contains(err.Error(), "--configmap") || found {
		t.Fatalf("a volume with an index: found=%v err=%v", found, err)
	}
}

// partsAPI is the parts' ConfigMaps as the API serves them: Get only.
type partsAPI struct {
	corev1client.ConfigMapInterface
	mu    sync.Mutex
	parts map[string][]byte
	gets  int
}

func (p *partsAPI) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.ConfigMap, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gets++
	part, ok := p.parts[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: chunkNS, Name: name}, BinaryData: map[string][]byte{bundle.PartKey: part}}, nil
}

func (p *partsAPI) set(name string, part []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parts[name] = part
}

// The ConfigMap source reads the parts when the index arrives; a part not
// there yet is read again with backoff until it is, while that index is
// the latest, and a newer event stops the retries of an older index.
func TestConfigMapSourceRetriesAMissingPart(t *testing.T) {
	ring := testenv.Keyring(t, 1)
	cm, parts := chunked(t, ring, testenv.DenyTools("Bash", "Write"), 100, time.Now())
	cm.ResourceVersion = "1"
	api := &partsAPI{parts: map[string][]byte{}}
	late := bundle.PartName(bundle.DefaultConfigMapName, 2)
	for name, p := range parts {
		if name != late {
			api.parts[name] = p
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, d, m := newChunkLoader(t, ring)
	src := &configMapSource{namespace: chunkNS, name: bundle.DefaultConfigMapName}
	src.chunks.ctx, src.chunks.parts = ctx, api
	src.apply(l, cm)
	if d.Ready() || testutil.ToFloat64(m.Rejected.WithLabelValues(ReasonMissingPart)) != 1 {
		t.Fatalf("a part missing: ready %v, missing_part refusals %v", d.Ready(), testutil.ToFloat64(m.Rejected.WithLabelValues(ReasonMissingPart)))
	}
	api.set(late, parts[late])
	testenv.EventuallyWithin(t, 10*time.Second, 20*time.Millisecond, "the bundle loaded once its part is there", func() (bool, string) {
		return d.Ready(), fmt.Sprintf("rejected %+v", l.Rejected())
	})

	// A newer index whose part never comes, then a newer event still: the
	// older index's retries stop.
	next, nextParts := chunked(t, ring, testenv.DenyTools("Read"), 100, time.Now().Add(time.Second))
	next.ResourceVersion = "2"
	for name, p := range nextParts {
		if name != late {
			api.set(name, p)
		}
	}
	src.apply(l, next)
	src.mu.Lock()
	src.chunks.latest = "3" // as a newer event (of another bundle) would
	src.mu.Unlock()
	api.mu.Lock()
	before := api.gets
	api.mu.Unlock()
	deadline := time.Now().Add(2 * partRetryFirst)
	for time.Now().Before(deadline) {
		api.mu.Lock()
		gets := api.gets
		api.mu.Unlock()
		if gets != before {
			t.Fatalf("parts of an index no longer the latest were read again (%d gets, %d before)", gets, before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
