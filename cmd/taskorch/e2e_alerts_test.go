package main

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/internal/testing/mtatest"
)

// Every rule of docs/alerts.yml, evaluated by Prometheus's own rule engine (`promtool test
// rules`) on series named and labelled as a real `taskorch worker`'s /metrics serves them: the
// worker runs with the Redis transport, the comms processes and a real mail server, with a
// paused queue, a type no worker claims and an e-mail the server refuses for good. Each alert
// fires when it should and not in the cases that must not fire it: a paused queue does not
// stall, and the first dead task of a type after a restart fires (its series starts at 0).
// promtool (Debian's prometheus package) is required: scripts/install-deps.sh installs it.
func TestE2EAlertRules(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool is required to test docs/alerts.yml: install Debian's prometheus package (scripts/install-deps.sh)")

	mta := mtatest.Start(t, "ann")
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	env := append(transportEnv(t, "redis"), "TASKORCH_HTTP_ADDR="+addr, "TASKORCH_PROCESSES=comms",
		"TASKORCH_EMAIL_PROVIDER=smtp", "TASKORCH_SMTP_URL="+mta.URL(), "TASKORCH_EMAIL_FROM=noreply@sender.test")
	startWorkerProc(t, url, env...)
	base := "http://" + addr
	require.Eventually(t, func() bool { code, _ := get(base + "/readyz"); return code == http.StatusOK },
		30*time.Second, 20*time.Millisecond, "worker ready")

	// Before any task ran, the per-type counters of the types the worker handles exist at 0.
	first := scrape(t, base)
	for _, s := range []string{
		`taskorch_tasks_failed_total{outcome="dead",task_type="email"}`,
		`taskorch_tasks_failed_total{outcome="failed",task_type="email"}`,
		`taskorch_tasks_claimed_total{task_type="email"}`,
		`taskorch_tasks_completed_total{task_type="email"}`,
		`taskorch_provider_refusals_total{task_type="email"}`,
		`taskorch_tasks_failed_total{outcome="dead",task_type="db_function"}`,
	} {
		v, ok := first[s]
		require.True(t, ok, "%s is not served before the first task", s)
		require.Zero(t, v, s)
	}

	waitFor(t, pool, "the comms process installed", `select to_regprocedure('comms.send_email(text,text,text,text,timestamptz)') is not null`)
	_, err = pool.Exec(t.Context(), `update comms.process_config set backoff_base = '100 ms', check_interval = '500 ms'`)
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), `select queues.pause_queue('held.type')`)
	require.NoError(t, err)
	enqueue(t, pool, "held.type", `{}`, 0)
	enqueue(t, pool, "nobody.handles.this", `{}`, 0)
	id := q[int64](t, pool, `select comms.send_email($1, 'Welcome', 'Hello')`, mta.Address("bob"))
	waitFor(t, pool, "the email failed", `select exists (select 1 from comms.send_email_task_failed where send_email_task_id = $1)`, id)

	want := map[string]float64{
		`taskorch_provider_refusals_total{task_type="email"}`:             1,
		`taskorch_processes_failed_last_hour{process="comms.send_email"}`: 1,
		`taskorch_queue_paused{task_type="held.type"}`:                    1,
		`taskorch_queue_paused{task_type="nobody.handles.this"}`:          0,
		`taskorch_queue_unserved{task_type="nobody.handles.this"}`:        1,
		`taskorch_history_default_partition_rows`:                         0,
		`taskorch_transport_fallback{transport="redis"}`:                  0,
		`taskorch_leader`: 1,
		`taskorch_tasks_failed_total{outcome="dead",task_type="nobody.handles.this"}`: 0,
	}
	var got map[string]float64
	require.Eventually(t, func() bool {
		got = scrape(t, base)
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "the worker's metrics after the workload")
	for k, v := range want {
		require.Equal(t, v, got[k], k)
	}

	rules, err := os.ReadFile("../../docs/alerts.yml")
	require.NoError(t, err)
	checkRulesUseServedSeries(t, rules, got)

	dir := t.TempDir()
	// promtool compares annotations exactly: the rules are tested without theirs, which
	// `promtool check rules` checks (templates included) on the file as it is.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts.yml"), withoutAnnotations(t, rules), 0o600))
	out, err := exec.Command(promtool, "check", "rules", "../../docs/alerts.yml").CombinedOutput()
	require.NoError(t, err, "promtool check rules docs/alerts.yml:\n%s", out)

	s := servedSeries{t: t, got: got}
	tests := alertTests(&s)
	seen := map[string]bool{}
	for _, g := range tests {
		for _, c := range g.AlertRuleTest {
			seen[c.Alertname] = true
		}
	}
	for _, name := range ruleNames(t, rules) {
		require.True(t, seen[name], "alert %s has no promtool test", name)
	}
	b, err := yaml.Marshal(map[string]any{"rule_files": []string{"alerts.yml"}, "evaluation_interval": "1m", "tests": tests})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts_test.yml"), b, 0o600))
	cmd := exec.Command(promtool, "test", "rules", "alerts_test.yml")
	cmd.Dir = dir
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s\ntest file:\n%s", out, b)
	t.Logf("promtool test rules: %s", strings.TrimSpace(string(out)))
}

// promTest is one test group of a promtool rules test file.
type promTest struct {
	Name          string        `yaml:"name"`
	Interval      string        `yaml:"interval"`
	InputSeries   []inputSeries `yaml:"input_series"`
	AlertRuleTest []alertCase   `yaml:"alert_rule_test"`
}

type inputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type alertCase struct {
	EvalTime  string     `yaml:"eval_time"`
	Alertname string     `yaml:"alertname"`
	ExpAlerts []expAlert `yaml:"exp_alerts"`
}

type expAlert struct {
	ExpLabels map[string]string `yaml:"exp_labels"`
}

// fires is an alert case expecting one alert with labels; none expects no alert.
func fires(at, alert string, labels ...string) alertCase {
	l := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	return alertCase{EvalTime: at, Alertname: alert, ExpAlerts: []expAlert{{ExpLabels: l}}}
}

func none(at, alert string) alertCase {
	return alertCase{EvalTime: at, Alertname: alert, ExpAlerts: []expAlert{}}
}

// alertTests are the cases of every rule, on series s takes from the worker's /metrics.
func alertTests(s *servedSeries) []promTest {
	g := func(name string, series []inputSeries, cases ...alertCase) promTest {
		return promTest{Name: name, Interval: "1m", InputSeries: series, AlertRuleTest: cases}
	}
	in := func(series, values string) inputSeries { return inputSeries{Series: series, Values: values} }
	const inst = "w1:9090"
	dead := s.one("taskorch_tasks_failed_total", "task_type", "email", "outcome", "dead")
	failedForGood := s.one("taskorch_tasks_failed_total", "task_type", "email", "outcome", "failed")
	retry := s.one("taskorch_tasks_failed_total", "task_type", "email", "outcome", "retry")
	claimed := s.one("taskorch_tasks_claimed_total", "task_type", "email")
	held := s.one("taskorch_oldest_pending_age_seconds", "task_type", "held.type")
	heldPaused := s.one("taskorch_queue_paused", "task_type", "held.type")
	stalled := s.one("taskorch_oldest_pending_age_seconds", "task_type", "nobody.handles.this")
	stalledPaused := s.one("taskorch_queue_paused", "task_type", "nobody.handles.this")
	unserved := s.one("taskorch_queue_unserved", "task_type", "nobody.handles.this")
	depth := s.one("taskorch_queue_depth", "task_type", "nobody.handles.this", "status", "pending")
	refusals := s.one("taskorch_provider_refusals_total", "task_type", "email")
	fallback := s.one("taskorch_transport_fallback", "transport", "redis")
	delay := s.buckets("taskorch_task_start_delay_seconds_bucket", "task_type", "email")
	var slow, fast []inputSeries
	for _, b := range delay {
		le := b.labels["le"]
		upper, err := strconv.ParseFloat(le, 64)
		require.NoError(s.t, err, le)
		if upper > 60 { // every start took more than a minute
			slow = append(slow, in(b.series, "0+10x30"))
		} else {
			slow = append(slow, in(b.series, "0x30"))
		}
		fast = append(fast, in(b.series, "0+10x30")) // every start within the smallest bucket
	}
	return []promTest{
		g("a leader", []inputSeries{in(s.one("taskorch_leader"), "1x10")}, none("5m", "TaskorchNoLeader")),
		g("no leader", []inputSeries{in(s.one("taskorch_leader"), "1 1 0x10")}, none("3m", "TaskorchNoLeader"),
			fires("5m", "TaskorchNoLeader", "severity", "critical")),
		g("no worker at all", nil,
			fires("3m", "TaskorchNoLeader", "severity", "critical")),

		g("no dead task", []inputSeries{in(dead, "0x20"), in(failedForGood, "0x20")}, none("10m", "TaskorchTasksDead")),
		g("a dead task", []inputSeries{in(dead, "0 0 0 1x10"), in(failedForGood, "0x15")},
			none("2m", "TaskorchTasksDead"), fires("4m", "TaskorchTasksDead", "task_type", "email", "severity", "warning")),
		// The worker restarts (its counters start again at 0, as served before any task) and the
		// first task after it goes dead: increase() sees it.
		g("the first dead task after a restart", []inputSeries{in(dead, "4 4 4 _ 0 0 1x10")},
			none("5m", "TaskorchTasksDead"), fires("7m", "TaskorchTasksDead", "task_type", "email", "severity", "warning")),
		g("a task failed for good", []inputSeries{in(failedForGood, "0 0 2x10")},
			fires("4m", "TaskorchTasksDead", "task_type", "email", "severity", "warning")),

		g("retries high", []inputSeries{in(retry, "0+1x40"), in(claimed, "0+2x40"), in(dead, "0x40"), in(failedForGood, "0x40")},
			none("10m", "TaskorchHighRetryRate"), fires("30m", "TaskorchHighRetryRate", "task_type", "email", "severity", "warning")),
		g("retries low", []inputSeries{in(retry, "0+1x40"), in(claimed, "0+10x40"), in(dead, "0x40"), in(failedForGood, "0x40")},
			none("30m", "TaskorchHighRetryRate")),

		g("a queue stalled", []inputSeries{in(stalled, "700x10"), in(stalledPaused, "0x10")},
			none("4m", "TaskorchQueueStalled"), fires("6m", "TaskorchQueueStalled", "task_type", "nobody.handles.this", "severity", "critical")),
		g("a paused queue waits on purpose", []inputSeries{in(held, "700+60x15"), in(heldPaused, "1x15")},
			none("10m", "TaskorchQueueStalled")),
		g("a queue resumed and still stalled", []inputSeries{in(held, "700+60x15"), in(heldPaused, "1x5 0x10")},
			none("9m", "TaskorchQueueStalled"), fires("12m", "TaskorchQueueStalled", "task_type", "held.type", "severity", "critical")),

		g("a type unserved", []inputSeries{in(stalled, "30+60x10"), in(unserved, "1x10")},
			fires("3m", "TaskorchTaskTypeUnserved", "task_type", "nobody.handles.this", "severity", "critical")),
		g("a type served again", []inputSeries{in(stalled, "30+60x10"), in(unserved, "1 0x10")},
			none("5m", "TaskorchTaskTypeUnserved")),

		g("backlog high", []inputSeries{in(depth, "200000x20")},
			none("10m", "TaskorchBacklogHigh"), fires("16m", "TaskorchBacklogHigh", "task_type", "nobody.handles.this", "severity", "warning")),
		g("backlog low", []inputSeries{in(depth, "5000x20")}, none("16m", "TaskorchBacklogHigh")),

		g("starts late", slow, fires("20m", "TaskorchStartDelayHigh", "task_type", "email", "severity", "warning")),
		g("starts on time", fast, none("20m", "TaskorchStartDelayHigh")),

		g("leases lost", []inputSeries{in(s.one("taskorch_leases_lost_total"), "0+1x20"), in(s.one("taskorch_completions_refused_total"), "0x20")},
			fires("10m", "TaskorchLeasesLost", "severity", "warning")),
		g("a lease lost", []inputSeries{in(s.one("taskorch_leases_lost_total"), "0 1x20"), in(s.one("taskorch_completions_refused_total"), "0x20")},
			none("10m", "TaskorchLeasesLost")),

		g("a worker gone", []inputSeries{in(s.one("taskorch_workers_reaped_total"), "0 0 0 1x20")},
			fires("5m", "TaskorchWorkersReaped", "severity", "warning"), none("20m", "TaskorchWorkersReaped")),
		g("no worker gone", []inputSeries{in(s.one("taskorch_workers_reaped_total"), "0x20")}, none("10m", "TaskorchWorkersReaped")),

		g("history maintenance failing", []inputSeries{in(s.one("taskorch_maintenance_errors_total", "op", "history"), "0+1x30")},
			fires("20m", "TaskorchMaintenanceErrors", "op", "history", "severity", "warning")),
		g("one history error", []inputSeries{in(s.one("taskorch_maintenance_errors_total", "op", "history"), "0 1x30")},
			none("20m", "TaskorchMaintenanceErrors")),

		g("pool saturated", []inputSeries{
			in(s.one("taskorch_db_pool_acquired_conns"), "10x30"), in(s.one("taskorch_db_pool_max_conns"), "10x30"),
			in(s.one("taskorch_db_pool_acquire_wait_seconds_total"), "0+60x30")},
			fires("20m", "TaskorchDBPoolSaturated", "instance", inst, "severity", "warning")),
		g("pool busy, nobody waits", []inputSeries{
			in(s.one("taskorch_db_pool_acquired_conns"), "10x30"), in(s.one("taskorch_db_pool_max_conns"), "10x30"),
			in(s.one("taskorch_db_pool_acquire_wait_seconds_total"), "0x30")},
			none("20m", "TaskorchDBPoolSaturated")),

		g("a process failed", []inputSeries{in(s.one("taskorch_processes_failed_last_hour", "process", "comms.send_email"), "0 0 1x10")},
			none("1m", "TaskorchProcessesFailed"), fires("3m", "TaskorchProcessesFailed", "process", "comms.send_email", "severity", "warning")),
		g("no process failed", []inputSeries{in(s.one("taskorch_processes_failed_last_hour", "process", "comms.send_email"), "0x10")},
			none("5m", "TaskorchProcessesFailed")),

		// The counter is served at 0 before the first refusal: increase() sees the first.
		g("the provider refuses", []inputSeries{in(refusals, "0 0 1x20")},
			none("1m", "TaskorchProviderRefusals"), fires("3m", "TaskorchProviderRefusals", "task_type", "email", "severity", "warning"),
			none("20m", "TaskorchProviderRefusals")),

		g("transport down", []inputSeries{in(fallback, "0 1x10")},
			none("4m", "TaskorchTransportFallback"),
			fires("7m", "TaskorchTransportFallback", "instance", inst, "transport", "redis", "severity", "warning")),
		g("transport flapped", []inputSeries{in(fallback, "0 1 1 1 0x10")}, none("4m", "TaskorchTransportFallback"), none("8m", "TaskorchTransportFallback")),

		g("history in the default partition", []inputSeries{in(s.one("taskorch_history_default_partition_rows"), "0 3x5")},
			none("0m", "TaskorchHistoryDefaultPartition"), fires("2m", "TaskorchHistoryDefaultPartition", "severity", "warning")),
		g("default partition empty", []inputSeries{in(s.one("taskorch_history_default_partition_rows"), "0x5")},
			none("4m", "TaskorchHistoryDefaultPartition")),
	}
}

// servedSeries picks input series from what the worker served, with the labels Prometheus adds
// at scrape time (job, instance).
type servedSeries struct {
	t   *testing.T
	got map[string]float64
}

type served struct {
	series string
	labels map[string]string
}

var sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$`)
var labelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseSample splits `name{a="b",...}` into its name and labels.
func parseSample(t *testing.T, key string) (string, map[string]string) {
	m := sampleRE.FindStringSubmatch(key)
	require.NotNil(t, m, "a sample key: %s", key)
	labels := map[string]string{}
	for _, l := range labelRE.FindAllStringSubmatch(m[2], -1) {
		labels[l[1]] = l[2]
	}
	return m[1], labels
}

// find returns the served series of name whose labels include match (pairs), sorted.
func (s *servedSeries) find(name string, match ...string) []served {
	var out []served
	for key := range s.got {
		n, labels := parseSample(s.t, key)
		if n != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(match); i += 2 {
			ok = ok && labels[match[i]] == match[i+1]
		}
		if !ok {
			continue
		}
		labels["job"], labels["instance"] = "taskorch", "w1:9090"
		var ls []string
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			ls = append(ls, fmt.Sprintf("%s=%q", k, labels[k]))
		}
		out = append(out, served{series: name + "{" + strings.Join(ls, ",") + "}", labels: labels})
	}
	slices.SortFunc(out, func(a, b served) int { return strings.Compare(a.series, b.series) })
	require.NotEmpty(s.t, out, "the worker serves no %s with %v", name, match)
	return out
}

// one is the one served series of name with match.
func (s *servedSeries) one(name string, match ...string) string {
	found := s.find(name, match...)
	require.Len(s.t, found, 1, "%s %v", name, match)
	return found[0].series
}

// buckets are the served histogram buckets of name with match.
func (s *servedSeries) buckets(name string, match ...string) []served { return s.find(name, match...) }

// scrape reads a worker's /metrics as `name{label="value",...}` (labels sorted) → value.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	code, body := get(base + "/metrics")
	require.Equal(t, http.StatusOK, code)
	out := map[string]float64{}
	for line := range strings.SplitSeq(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		name, labels := parseSample(t, line[:i])
		var ls []string
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			ls = append(ls, fmt.Sprintf("%s=%q", k, labels[k]))
		}
		key := name
		if len(ls) > 0 {
			key += "{" + strings.Join(ls, ",") + "}"
		}
		out[key] = v
	}
	return out
}

// rulesFile is docs/alerts.yml's shape.
type rulesFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func parseRules(t *testing.T, b []byte) rulesFile {
	var f rulesFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&f))
	require.NotEmpty(t, f.Groups)
	return f
}

func ruleNames(t *testing.T, b []byte) []string {
	var names []string
	for _, g := range parseRules(t, b).Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert)
			require.NotContains(t, names, r.Alert, "alert names are unique")
			names = append(names, r.Alert)
		}
	}
	return names
}

// withoutAnnotations is the rules file without its rules' annotations.
func withoutAnnotations(t *testing.T, b []byte) []byte {
	f := parseRules(t, b)
	for gi := range f.Groups {
		for ri := range f.Groups[gi].Rules {
			f.Groups[gi].Rules[ri].Annotations = nil
		}
	}
	out, err := yaml.Marshal(f)
	require.NoError(t, err)
	return out
}

var (
	metricRefRE = regexp.MustCompile(`\btaskorch_[a-z_]+`)
	// The labels a rule groups, joins or matches by: by (...), on (...), and name{label...}.
	groupingRE = regexp.MustCompile(`\b(?:by|on)\s*\(([^)]*)\)`)
	matcherRE  = regexp.MustCompile(`\b(taskorch_[a-z_]+)\{([^}]*)\}`)
)

// checkRulesUseServedSeries checks that every rule is complete and that each metric its
// expression names, and each label it groups, joins or matches by, is one the worker serves
// (instance and job are Prometheus's, le a histogram bucket's).
func checkRulesUseServedSeries(t *testing.T, rules []byte, got map[string]float64) {
	t.Helper()
	labelsOf := map[string]map[string]bool{}
	for key := range got {
		name, labels := parseSample(t, key)
		if labelsOf[name] == nil {
			labelsOf[name] = map[string]bool{}
		}
		for l := range labels {
			labelsOf[name][l] = true
		}
	}
	for _, g := range parseRules(t, rules).Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Expr, r.Alert)
			_, err := time.ParseDuration(r.For)
			require.NoError(t, err, "%s: for", r.Alert)
			require.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], "%s: severity label", r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			require.NotEmpty(t, r.Annotations["description"], r.Alert)
			refs := metricRefRE.FindAllString(r.Expr, -1)
			require.NotEmpty(t, refs, "%s uses no taskorch metric", r.Alert)
			served := map[string]bool{"instance": true, "job": true}
			for _, name := range refs {
				require.Contains(t, labelsOf, name, "%s uses %s, which the worker does not serve", r.Alert, name)
				for l := range labelsOf[name] {
					served[l] = true
				}
			}
			var used []string
			for _, m := range groupingRE.FindAllStringSubmatch(r.Expr, -1) {
				for l := range strings.SplitSeq(m[1], ",") {
					used = append(used, strings.TrimSpace(l))
				}
			}
			for _, m := range matcherRE.FindAllStringSubmatch(r.Expr, -1) {
				for l := range strings.SplitSeq(m[2], ",") {
					name, _, _ := strings.Cut(strings.TrimSpace(l), "=")
					name = strings.TrimRight(name, "!~")
					require.True(t, labelsOf[m[1]][name], "%s matches %s on %s, which the worker does not serve", r.Alert, m[1], name)
				}
			}
			for _, l := range used {
				require.True(t, served[l], "%s groups or joins by %s, which none of its metrics carries", r.Alert, l)
			}
		}
	}
}
