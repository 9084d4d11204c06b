package packaging

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const kube = repo + "/deploy/kubernetes"

// decodeStrict decodes one manifest into the Kubernetes API type: an
// unknown or misspelt field, a duplicate key or a wrong type is an error,
// as with `kubectl apply --validate=strict`.
func decodeStrict(t *testing.T, file string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(kube, file))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("\n---")) {
		t.Fatalf("%s: one object per file", file)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

const namespace = "agentjail"

// checkPod checks what every agentjail pod needs (docs/containers.md):
// a user namespace and an unmasked /proc, the container profile from
// `agentjail seccomp export --for-container`, a non-root user without
// capabilities, the API key read-only from a Secret, results and state on
// their claims, and the image's own ENTRYPOINT (agentjail init) left alone.
func checkPod(t *testing.T, where string, pod corev1.PodSpec, claims map[string]string) {
	t.Helper()
	errorf := func(format string, args ...any) { t.Helper(); t.Errorf(where+": "+format, args...) }
	if pod.HostUsers == nil || *pod.HostUsers {
		errorf("hostUsers must be false: procMount: Unmasked requires a user namespace")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		errorf("automountServiceAccountToken must be false: the agent needs no API access")
	}
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1000 || sc.RunAsGroup == nil || *sc.RunAsGroup != 1000 || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		errorf("pod securityContext must run as uid and gid 1000, runAsNonRoot: %+v", sc)
		return
	}
	if sp := sc.SeccompProfile; sp == nil || sp.Type != corev1.SeccompProfileTypeLocalhost || sp.LocalhostProfile == nil || *sp.LocalhostProfile != "profiles/agentjail-container.json" {
		errorf("seccompProfile %+v, want Localhost profiles/agentjail-container.json", sp)
	} else if _, err := os.Stat(filepath.Join(kube, "seccomp", filepath.Base(*sp.LocalhostProfile))); err != nil {
		errorf("the seccomp profile is not in the repository: %v", err)
	}
	if sc.AppArmorProfile == nil || sc.AppArmorProfile.Type != corev1.AppArmorProfileTypeUnconfined {
		errorf("appArmorProfile %+v, want Unconfined (the runtime's default denies mount)", sc.AppArmorProfile)
	}
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("%s: %d containers, %d init containers; want one container", where, len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	if len(c.Command) != 0 || len(c.Args) != 0 {
		errorf("command %q args %q: the image's ENTRYPOINT (agentjail init) and CMD (the ops loop) must run", c.Command, c.Args)
	}
	csc := c.SecurityContext
	if csc == nil || csc.ProcMount == nil || *csc.ProcMount != corev1.UnmaskedProcMount {
		errorf("container securityContext.procMount must be Unmasked")
	}
	if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
		csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) != 0 ||
		csc.Privileged != nil && *csc.Privileged {
		errorf("container securityContext must drop ALL capabilities, add none, forbid privilege escalation, not be privileged: %+v", csc)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	env := envMap(c)
	mounted := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		if _, ok := volumes[m.Name]; !ok {
			errorf("volumeMount %s: no such volume", m.Name)
		}
		mounted[m.MountPath] = m
	}
	// The API key: a Secret mounted read-only, read by the ops loop from
	// ANTHROPIC_API_KEY_FILE, never a value in the pod's spec.
	keyDir := filepath.Dir(env["ANTHROPIC_API_KEY_FILE"])
	if m, ok := mounted[keyDir]; !ok || volumes[m.Name].Secret == nil || !m.ReadOnly || m.SubPath != "" {
		errorf("ANTHROPIC_API_KEY_FILE %q: want a file of a Secret mounted read-only (whole, so rotation reaches it), got %+v", env["ANTHROPIC_API_KEY_FILE"], m)
	} else if mode := volumes[m.Name].Secret.DefaultMode; mode == nil || *mode&0o007 != 0 {
		errorf("the Secret must not be readable by others: defaultMode %v", mode)
	}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "ANTHROPIC_API_KEY") && e.Name != "ANTHROPIC_API_KEY_FILE" || e.ValueFrom != nil {
			errorf("env %s: the key comes from the mounted file only", e.Name)
		}
	}
	// The ops loop's directories: results and state on their claims, the
	// repositories on a volume.
	for dir, claim := range map[string]string{"CLAUDEOPS_RESULTS_DIR": claims["results"], "CLAUDEOPS_STATE_DIR": claims["state"], "CLAUDEOPS_REPOS_DIR": ""} {
		m, ok := mounted[env[dir]]
		switch {
		case env[dir] == "" || !ok:
			errorf("%s = %q: not a mounted volume", dir, env[dir])
		case m.ReadOnly:
			errorf("%s is mounted read-only", dir)
		case claim != "" && (volumes[m.Name].PersistentVolumeClaim == nil || volumes[m.Name].PersistentVolumeClaim.ClaimName != claim):
			errorf("%s: volume %+v, want claim %s", dir, volumes[m.Name], claim)
		}
	}
}

func envMap(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// TestKubernetesManifests decodes every manifest strictly into the API types
// and checks the fields that make agentjail work.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	var ns corev1.Namespace
	decodeStrict(t, "namespace.yaml", &ns)
	if ns.Kind != "Namespace" || ns.Name != namespace || ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace.yaml: %s %s labels %v: want Namespace %s enforcing privileged (procMount: Unmasked is a privileged field)", ns.Kind, ns.Name, ns.Labels, namespace)
	}

	claims := map[string]string{}
	for _, what := range []string{"results", "state"} {
		var pvc corev1.PersistentVolumeClaim
		decodeStrict(t, "pvc-"+what+".yaml", &pvc)
		if pvc.Kind != "PersistentVolumeClaim" || pvc.Namespace != namespace || !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
			t.Errorf("pvc-%s.yaml: %s %s/%s %v", what, pvc.Kind, pvc.Namespace, pvc.Name, pvc.Spec.AccessModes)
		}
		claims[what] = pvc.Name
	}

	var cj batchv1.CronJob
	decodeStrict(t, "cronjob.yaml", &cj)
	if cj.APIVersion != "batch/v1" || cj.Kind != "CronJob" || cj.Namespace != namespace {
		t.Errorf("cronjob.yaml: %s %s in %q", cj.APIVersion, cj.Kind, cj.Namespace)
	}
	if len(strings.Fields(cj.Spec.Schedule)) != 5 || cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("cronjob.yaml: schedule %q, concurrencyPolicy %q: want a 5-field schedule and Forbid", cj.Spec.Schedule, cj.Spec.ConcurrencyPolicy)
	}
	job := cj.Spec.JobTemplate.Spec
	if job.BackoffLimit == nil || *job.BackoffLimit != 0 || job.ActiveDeadlineSeconds == nil || job.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("cronjob.yaml: backoffLimit %v, activeDeadlineSeconds %v, restartPolicy %q: want 0, a backstop, Never", job.BackoffLimit, job.ActiveDeadlineSeconds, job.Template.Spec.RestartPolicy)
	}
	checkPod(t, "cronjob.yaml", job.Template.Spec, claims)
	if env := envMap(job.Template.Spec.Containers[0]); env["CLAUDEOPS_CYCLES"] != "1" {
		t.Errorf("cronjob.yaml: CLAUDEOPS_CYCLES = %q, want 1 (one ops cycle per schedule)", env["CLAUDEOPS_CYCLES"])
	}

	var dep appsv1.Deployment
	decodeStrict(t, "deployment.yaml", &dep)
	if dep.APIVersion != "apps/v1" || dep.Kind != "Deployment" || dep.Namespace != namespace {
		t.Errorf("deployment.yaml: %s %s in %q", dep.APIVersion, dep.Kind, dep.Namespace)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 || dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("deployment.yaml: replicas %v, strategy %q: want one loop, Recreate (the claim is ReadWriteOnce)", dep.Spec.Replicas, dep.Spec.Strategy.Type)
	}
	for k, v := range dep.Spec.Selector.MatchLabels {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("deployment.yaml: selector %s=%s does not match the template's labels %v", k, v, dep.Spec.Template.Labels)
		}
	}
	if p := dep.Spec.Template.Spec.RestartPolicy; p != "" && p != corev1.RestartPolicyAlways {
		t.Errorf("deployment.yaml: restartPolicy %q", p)
	}
	checkPod(t, "deployment.yaml", dep.Spec.Template.Spec, claims)
	if env := envMap(dep.Spec.Template.Spec.Containers[0]); env["CLAUDEOPS_CYCLES"] != "" || env["CLAUDEOPS_INTERVAL"] == "" {
		t.Errorf("deployment.yaml: CLAUDEOPS_CYCLES %q, CLAUDEOPS_INTERVAL %q: want a loop with an interval", env["CLAUDEOPS_CYCLES"], env["CLAUDEOPS_INTERVAL"])
	}
}

// TestKubernetesStrictDecoding shows the decoder refuses a misspelt field,
// so the checks above cannot pass on a manifest the API server would reject.
func TestKubernetesStrictDecoding(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(kube, "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(data, []byte("procMount: Unmasked\n"), []byte("procMont: Unmasked\n"), 1)
	if bytes.Equal(bad, data) {
		t.Fatal("deployment.yaml has no procMount: Unmasked")
	}
	var dep appsv1.Deployment
	if err := yaml.UnmarshalStrict(bad, &dep); err == nil || !strings.Contains(err.Error(), "procMont") {
		t.Errorf("a misspelt field decoded: %v", err)
	}
}

// TestKubernetesSeccompProfileCurrent: the committed Localhost profile is
// what `agentjail seccomp export --for-container` prints now.
func TestKubernetesSeccompProfileCurrent(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "agentjail")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/agentjail/agentjail/cmd/agentjail").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want, err := exec.Command(bin, "seccomp", "export", "--for-container").Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(kube, "seccomp/agentjail-container.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("deploy/kubernetes/seccomp/agentjail-container.json is stale: run `make kubernetes-seccomp`")
	}
}
