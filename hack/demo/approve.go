package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// askAndApprove is the approval step: a payment over the cap is sent with
// "wait", and curl stays blocked on it while the sidecar's ApprovalRequest
// is listed and approved with the status write a person types; then
// curl's answer, the allow, is printed. c finds the request (the demo's
// own wait, not shown); everything shown runs the real kubectl and curl.
func (d *demo) askAndApprove(c client.Client, ns string, pay map[string]any) error {
	waiting := map[string]any{"wait": "2m"}
	for k, v := range pay {
		waiting[k] = v
	}
	args := []string{"-s", "--unix-socket", d.socket, "-XPOST", "http://sidecar/v1/evaluate", "-d", compactJSON(waiting)}
	line := "$ curl " + shellJoin(args)
	fmt.Fprintln(d.out, line)
	held := exec.Command(d.curl, args...)
	var answer bytes.Buffer
	held.Stdout = &answer
	if err := held.Start(); err != nil {
		return fmt.Errorf("%s: %w", line, err)
	}
	done := make(chan error, 1)
	go func() { done <- held.Wait() }()
	// stop ends curl when the step fails; its error then is only "killed".
	stop := func() error { _ = held.Process.Kill(); return <-done }

	var name string
	if err := waitUntil(30*time.Second, func() bool {
		var list v1alpha1.ApprovalRequestList
		if c.List(context.Background(), &list, client.InNamespace(ns)) != nil || len(list.Items) != 1 {
			return false
		}
		name = list.Items[0].Name
		return true
	}); err != nil {
		select {
		case err := <-done:
			return fmt.Errorf("the sidecar created no ApprovalRequest, and answered (curl: %v):\n%s", err, answer.String())
		default:
			_ = stop()
			return fmt.Errorf("the sidecar never created the payment's ApprovalRequest: %w", err)
		}
	}
	select {
	case err := <-done:
		return fmt.Errorf("%s answered before anyone approved (%v):\n%s", line, err, answer.String())
	default:
	}
	fmt.Fprintln(d.out, "    (no answer yet: curl waits, and the sidecar has asked for a person's approval)")
	if _, err := d.run("", "get", "approvalrequests", "-n", ns); err != nil {
		_ = stop()
		return err
	}
	fmt.Fprintln(d.out, "    the approver's user name, which decidedBy must be (the admission policy checks it):")
	user, err := d.run("", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
	if err != nil {
		_ = stop()
		return err
	}
	patch := fmt.Sprintf(`{"status":{"decision":"Approved","decidedBy":%q,"message":"invoice 2026-118, checked"}}`, strings.TrimSpace(user))
	start := time.Now()
	if _, err := d.run("", "patch", "approvalrequest", name, "-n", ns, "--subresource=status", "--type=merge", "-p", patch); err != nil {
		_ = stop()
		return err
	}
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: %w", line, err)
		}
	case <-time.After(30 * time.Second):
		_ = stop()
		return fmt.Errorf("%s had no answer 30s after the approval", line)
	}
	fmt.Fprintf(d.out, "    curl's answer, %d ms after kubectl patch started:\n", time.Since(start).Milliseconds())
	fmt.Fprintln(d.out, indent(strings.TrimSpace(answer.String())))
	return d.summarize(line, answer.Bytes())
}

// compactJSON is v as one line, keys sorted, as the demo's curl sends it.
func compactJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSpace(buf.String())
}
