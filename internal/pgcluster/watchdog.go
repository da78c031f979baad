package pgcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
)

// watchdogScript is run by /bin/sh with $1 = data dir and the rest of the
// arguments = the command that stops the server. It blocks reading the pipe
// whose write end only the parent process holds: when the parent calls Stop
// it writes "done" and the script exits; if the parent dies in any other way
// (panic, os.Exit, SIGKILL) the kernel closes the pipe, read returns at EOF
// and the script stops the server and removes the data dir.
const watchdogScript = `read -r line
[ "$line" = done ] && exit 0
d=$1
shift
"$@" >/dev/null 2>&1
rm -rf -- "$d"
`

// watchdog is the handle on a running watchdog process for an ephemeral
// cluster.
type watchdog struct {
	w    *os.File // write end of the watchdog's stdin
	once sync.Once
}

// startWatchdog launches the watchdog for the cluster in dataDir.
func startWatchdog(r *runner, dataDir string) (*watchdog, error) {
	pr, pw, err := os.Pipe() // close-on-exec: no other child inherits pw
	if err != nil {
		return nil, err
	}
	defer func() { _ = pr.Close() }()
	stop := r.argv(filepath.Join(r.binDir, "pg_ctl"), "stop", "-D", dataDir, "-m", "immediate", "-w")
	args := append([]string{"-c", watchdogScript, "pgcluster-watchdog", dataDir}, stop...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Stdin = pr
	// Stdout and stderr stay nil (/dev/null): the watchdog must not hold
	// the parent's output pipes open, or `go test` would wait for it.
	cmd.Dir = "/"
	// Own process group, so that a Ctrl-C sent to the terminal's
	// foreground group does not kill the watchdog along with its parent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = pw.Close()
		return nil, fmt.Errorf("run /bin/sh: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reap it when it exits
	return &watchdog{w: pw}, nil
}

// release ends the watchdog. If done is true the cluster has been cleaned up
// and the watchdog exits without doing anything; otherwise it stops the
// server and removes the data dir itself.
func (w *watchdog) release(done bool) {
	w.once.Do(func() {
		if done {
			_, _ = w.w.WriteString("done\n")
		}
		_ = w.w.Close()
	})
}
