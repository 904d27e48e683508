//go:build cluster

package cluster

// What TestAgentJobWaitsForApproval needs: a Policy that asks, the call it
// asks for, and the Job and ApprovalRequest seen from outside, as a person
// with kubectl sees them.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
)

const wireTransferReason = "wire transfers over 1000 need a person"

// wireTransferPolicy asks a person about large wire transfers: a tool of
// this test's own, so that no sample's rule decides it.
const wireTransferPolicy = `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: wire-transfers}
spec:
  rules:
  - id: large-transfer
    description: ` + wireTransferReason + `
    effect: ask
    approval: {timeout: 5m}
    conditions:
    - {field: tool_name, operator: eq, value: wire_transfer}
    - {field: input.amount, operator: gt, value: 1000}
`

// wireTransfer is the Job's call: the sidecar holds its answer up to
// "wait" for a person's decision.
const wireTransfer = `{"tool_name": "wire_transfer", "agent_id": "coder", "input": {"amount": 5000, "to": "acct-42"}, "wait": "120s"}`

// approvePatch is the kubectl command line a person types to approve
// name, as user decidedBy; more is added to it (--as). The approvals
// admission policy wants decidedAt with the decision: the shell's
// $(date -u +%FT%TZ).
func approvePatch(name, decidedBy string, more ...string) []string {
	patch := fmt.Sprintf(`{"status":{"decision":"Approved","decidedBy":%q,"decidedAt":%q}}`, decidedBy, time.Now().UTC().Format(time.RFC3339))
	return append([]string{"patch", "approvalrequest", name, "-n", agentsNS, "--subresource=status", "--type=merge", "-p", patch}, more...)
}

// refusedAsker is the approvals admission policy's answer to the
// ServiceAccount that asked for an approval deciding it.
const refusedAsker = "an agent never decides its own calls"

// approvedBy is ApprovalRequest name as read now, approved by decidedBy:
// what a client that may only update the status (a sidecar's
// ServiceAccount) would send, as JSON for kubectl replace.
func approvedBy(t *testing.T, name, decidedBy string) string {
	t.Helper()
	ar := approvalRequest(t, name)
	ar.APIVersion, ar.Kind = v1alpha1.GroupVersion.String(), "ApprovalRequest"
	ar.ManagedFields = nil
	now := metav1.Now()
	ar.Status.Decision, ar.Status.DecidedBy, ar.Status.DecidedAt = v1alpha1.ApprovalApproved, decidedBy, &now
	b, err := json.Marshal(ar)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pendingApproval waits for the undecided ApprovalRequest of the
// wire_transfer call job's agent made.
func pendingApproval(t *testing.T, job string) v1alpha1.ApprovalRequest {
	t.Helper()
	var found v1alpha1.ApprovalRequest
	testenv.EventuallyWithin(t, 120*time.Second, poll, "the Job's call has an ApprovalRequest", func() (bool, string) {
		var list v1alpha1.ApprovalRequestList
		if err := node.Client.List(ctx(t), &list, client.InNamespace(agentsNS)); err != nil {
			return false, err.Error()
		}
		for _, ar := range list.Items {
			if ar.Spec.Tool == "wire_transfer" && ar.Status.Decision == "" {
				found = ar
				return true, ""
			}
		}
		pods, _ := kubectl("get", "pods", "-n", agentsNS, "-l", "job-name="+job, "-o", "wide")
		return false, fmt.Sprintf("%d ApprovalRequests, none pending for wire_transfer; pods:\n%s", len(list.Items), pods)
	})
	return found
}

func approvalRequest(t *testing.T, name string) v1alpha1.ApprovalRequest {
	t.Helper()
	var ar v1alpha1.ApprovalRequest
	if err := node.Client.Get(ctx(t), client.ObjectKey{Namespace: agentsNS, Name: name}, &ar); err != nil {
		t.Fatal(err)
	}
	return ar
}

// requireHeld fails unless job is still running, its agent container
// waiting for the sidecar's answer: it prints the answer the moment it has
// one, so its log is still empty (the Pod's status would lag: an agent
// answered at once still shows running for a second or two).
func requireHeld(t *testing.T, job string) {
	t.Helper()
	j, err := node.Clientset.BatchV1().Jobs(agentsNS).Get(ctx(t), job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := jobPod(t, job)
	logs := mustKubectl(t, "logs", "-n", agentsNS, p.Name, "-c", "agent")
	if finished(j) != "" || logs != "" {
		t.Fatalf("the Job's call was answered before anyone decided (Job %q): its agent printed %q", finished(j), logs)
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == "agent" && s.State.Running == nil {
			t.Fatalf("the Job's agent is not running while its call waits: %+v", s.State)
		}
	}
}

// finished is the condition that ended j (Complete or Failed), or "".
func finished(j *batchv1.Job) batchv1.JobConditionType {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

func jobPod(t *testing.T, job string) corev1.Pod {
	t.Helper()
	pods, err := node.Clientset.CoreV1().Pods(agentsNS).List(ctx(t), metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the Job's Pods: %d, %v", len(pods.Items), err)
	}
	return pods.Items[0]
}

func jobResourceVersion(t *testing.T, job string) string {
	t.Helper()
	j, err := node.Clientset.BatchV1().Jobs(agentsNS).Get(ctx(t), job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j.ResourceVersion
}

// jobCompleteAfter watches job from resourceVersion rv and returns when
// it was seen Complete: a watch, not a poll, so the time is the event's.
func jobCompleteAfter(t *testing.T, job, rv string) time.Time {
	t.Helper()
	w, err := node.Clientset.BatchV1().Jobs(agentsNS).Watch(ctx(t), metav1.ListOptions{
		FieldSelector: "metadata.name=" + job, ResourceVersion: rv, TimeoutSeconds: new(int64(150))})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		j, ok := ev.Object.(*batchv1.Job)
		if ev.Type != watch.Modified || !ok {
			continue
		}
		switch finished(j) {
		case batchv1.JobComplete:
			return time.Now()
		case batchv1.JobFailed:
			desc, _ := kubectl("describe", "pods", "-n", agentsNS, "-l", "job-name="+job)
			t.Fatalf("the Job failed after the approval:\n%s", desc)
		}
	}
	desc, _ := kubectl("describe", "pods", "-n", agentsNS, "-l", "job-name="+job)
	t.Fatalf("the Job did not complete within 150s of the approval:\n%s", desc)
	return time.Time{}
}

// agentAnswer is the answer job's agent printed and when it printed it
// (the container runtime's timestamp of the line).
func agentAnswer(t *testing.T, job string) (time.Time, string) {
	t.Helper()
	logs := strings.TrimSpace(mustKubectl(t, "logs", "-n", agentsNS, jobPod(t, job).Name, "-c", "agent", "--timestamps"))
	stamp, line, ok := strings.Cut(logs, " ")
	at, err := time.Parse(time.RFC3339Nano, stamp)
	if !ok || err != nil || strings.Contains(line, "\n") {
		t.Fatalf("the Job's agent printed %q, not one timestamped answer (%v)", logs, err)
	}
	return at, line
}
